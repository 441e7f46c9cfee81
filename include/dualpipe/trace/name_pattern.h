// The regular expressions a user gives for names in a profiler trace (--forward, ..., --comm-kernel). They are
// matched by std::regex, which backtracks: a repetition of something that can itself match in several ways
// ("(a|aa)+", "(a+)*") takes time exponential in the name's length (a 41-character name: a minute), and each
// unbounded repetition multiplies the time by the name's length (".*.*z" against one name of 4096 characters ran past
// 120 s; ".*z": 0.85 s). Such patterns are refused up front; what remains (words, alternatives, anchors, one ".*"
// between parts) costs at most the square of a name's length per distinct name.
#pragma once

#include <regex>
#include <string>

namespace dualpipe {

// At most this many unbounded repetitions (*, +, {n,}) in one pattern.
constexpr int kMaxPatternRepetitions = 1;

// `pattern` compiled, ECMAScript, any case; throws InvalidArgument naming `option` and the rule where it is longer
// than kMaxCommunicationPatternLength, repeats a group that holds a repetition or an alternative, has more than
// kMaxPatternRepetitions unbounded repetitions, or is no regular expression.
std::regex compile_name_pattern(const std::string& pattern, const std::string& option);

}  // namespace dualpipe

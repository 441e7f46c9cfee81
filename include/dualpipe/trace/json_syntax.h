// Why a file the trace readers were given is not JSON, said as a user would check it: empty, compressed, in
// another encoding, or a syntax error at a place, without the JSON library's exception ids.
#pragma once

#include <string>
#include <string_view>

namespace dualpipe {

// `text`: the file's contents; `library_message`: the parser's what().
std::string json_syntax_problem(std::string_view text, const std::string& library_message);

}  // namespace dualpipe

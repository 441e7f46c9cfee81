// libFuzzer target: the schedule text reader (parse_text), then the validator and the text writer on what it
// accepts. Any exception other than dualpipe::Error, a crash, a sanitizer report or a round trip that changes the
// actions is a finding.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  dualpipe::Schedule s;
  try {
    s = dualpipe::parse_text(text);
  } catch (const dualpipe::Error&) {
    return 0;
  }
  (void)dualpipe::find_problems(s);
  const dualpipe::Schedule again = dualpipe::parse_text(dualpipe::format_text(s));
  if (again.actions != s.actions) std::abort();
  return 0;
}

#include "dualpipe/trace/json_syntax.h"

#include <algorithm>
#include <cctype>

namespace dualpipe {

std::string json_syntax_problem(std::string_view text, const std::string& library_message) {
  if (text.empty()) return "the file is empty";
  if (std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); }))
    return "the file holds only white space";
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f && static_cast<unsigned char>(text[1]) == 0x8b)
    return "the file is gzip-compressed: gunzip it first (torch.profiler writes .json.gz when asked to)";
  const bool utf16_mark = text.size() >= 2 && ((static_cast<unsigned char>(text[0]) == 0xff &&
                                                static_cast<unsigned char>(text[1]) == 0xfe) ||
                                               (static_cast<unsigned char>(text[0]) == 0xfe &&
                                                static_cast<unsigned char>(text[1]) == 0xff));
  if (utf16_mark || text.substr(0, 64).find('\0') != std::string_view::npos)
    return "the file is UTF-16 (or holds NUL bytes): save it as UTF-8";
  // "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ...": the id is the library's.
  std::string message = library_message;
  if (message.rfind("[json.exception.", 0) == 0) {
    const std::size_t end = message.find("] ");
    if (end != std::string::npos) message.erase(0, end + 2);
  }
  return message;
}

}  // namespace dualpipe

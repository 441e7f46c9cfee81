// Text from a model or a file, made safe to print on a terminal: a byte-level model can write any byte, and a
// control byte (ESC above all) would be taken by the terminal as a command.
#pragma once

#include <string>
#include <string_view>

namespace dualpipe {

// `text` with newlines and tabs kept, valid UTF-8 kept, and every other byte (controls, DEL, bytes of no UTF-8
// sequence) written as \xNN; a backslash is written as \\ so the escapes cannot be confused with the text.
std::string printable(std::string_view text);

}  // namespace dualpipe

// Text from a model or a file, made safe to print on a terminal: a byte-level model can write any byte, and a
// control byte (ESC above all) would be taken by the terminal as a command.
#pragma once

#include <string>
#include <string_view>

namespace dualpipe {

// `text` with newlines and tabs kept, valid UTF-8 kept, and every other byte (controls, DEL, bytes of no UTF-8
// sequence, and the bytes of C1 controls and of the bidirectional overrides U+202A..U+202E and U+2066..U+2069,
// which reorder what a terminal shows) written as \xNN; a backslash is written as \\ so the escapes cannot be
// confused with the text.
std::string printable(std::string_view text);

// The same for text printed inside one line (a name in a table or a header): newlines and tabs escaped too.
std::string printable_line(std::string_view text);

// An error or warning for a terminal: printable(), cut after `limit` bytes of `text` with the rest counted
// ("... (N more bytes)"), since a message may quote an input of any size.
std::string printable_message(std::string_view text, size_t limit = 4096);

// Where printable_line(text) would first escape something other than a backslash (the byte's offset), or npos:
// for names that are refused rather than escaped.
size_t first_unprintable(std::string_view text);

}  // namespace dualpipe

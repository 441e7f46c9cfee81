// Reading an input file whole, within a size limit. Only regular files are read: a FIFO would block until some
// writer appears, and a device such as /dev/zero never ends, so both are refused by type before any read, and
// a regular file by its size before it is loaded. Errors name the path and the rule.
#pragma once

#include <cstddef>
#include <string>

namespace dualpipe {

// What a stat() mode that is not a regular file names: "a directory", "a FIFO (named pipe)", "a character
// device", ... for errors that refuse it.
const char* file_type_name(unsigned mode);

// The contents of `path`, at most max_bytes. Throws InvalidArgument naming the path when it is missing, a
// symbolic-link loop, not a regular file (naming its type), larger than max_bytes ("... for `what`"), or
// unreadable (with the system's reason). Errors call the file `label`; empty: the quoted path.
std::string read_file_within(const std::string& path, std::size_t max_bytes, const std::string& what,
                             const std::string& label = "");

// Throws InvalidArgument naming the path (as `label`) unless it is a regular file, or a link to one.
void require_regular_file(const std::string& path, const std::string& label);

}  // namespace dualpipe

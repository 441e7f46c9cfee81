// Writing a file so that it is either complete or absent: the contents go to a temporary file next to it, which
// is flushed to disk and renamed over the path. A process that dies or throws half-way leaves the old file (or
// none) and at worst a stray "<path>.tmp.<pid>.<n>", never a truncated file under the real name.
// Used for pictures, traces and checkpoints.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace dualpipe {

// Streams the contents through `write`. Throws InvalidArgument naming the path when it cannot be written, or when
// it is something a rename must not replace (a device such as /dev/full, a FIFO, a directory); a link to a regular
// file is followed, so the link stays. An exception from `write` removes the temporary file and propagates.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);
void write_file_atomically(const std::string& path, const std::string& contents);

// Checks, before long work starts, that write_file_atomically(path, ...) can create its temporary file next to
// `path` (the folder exists and is writable) and that `path` is a regular file or new; throws InvalidArgument
// naming the path and the reason.
void check_can_write_file(const std::string& path);

}  // namespace dualpipe

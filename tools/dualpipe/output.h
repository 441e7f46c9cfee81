// Writing a command's output to stdout so that a failed write (a full disk, /dev/full, a closed pipe) is an
// error with a message instead of lost output and exit status 0.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "dualpipe/util/number_format.h"  // formatted(): printf into a string, for the tables
#include "dualpipe/util/output_paths.h"

namespace dualpipe::cli {

// Writes `text` to stdout and flushes it; throws OutputError naming the errno text when either fails.
void write_stdout(std::string_view text);

// Flushes stdout (std::cout and C stdio); throws OutputError when it or any earlier write failed. main() calls
// it after every command, so output printed piecewise is checked too.
void finish_stdout();


// Adds -o,--output: the file that takes what the command would print (any --format), written whole or not at all.
CLI::Option* add_output_option(CLI::App& command, std::string& path);
// Adds -f,--format, one of `forms` (`help` says what each is; the default is the option's value), and -o,--output.
void add_format_and_output(CLI::App& command, std::string& format, std::string& output,
                           const std::vector<std::string>& forms = {"table", "json"},
                           const std::string& help = "Output form: table or json");

// Checks, before any work, that `path` can be written and names none of the command's `inputs`; nothing to check
// when the output is stdout (empty path).
void check_output(const std::string& path, const std::vector<NamedPath>& inputs);

// Writes `text` to `path` whole or not at all, or to stdout when `path` is empty.
void write_output(const std::string& path, std::string_view text);

}  // namespace dualpipe::cli

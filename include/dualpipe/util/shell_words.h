// A command line printed for a user to copy into a POSIX shell: each argument exactly as the program would get it.
#pragma once

#include <string>
#include <vector>

namespace dualpipe {

// `word` as the shell reads it back: unchanged when it holds only characters no shell treats specially
// (letters, digits and `@%+=:,./_-`), otherwise in single quotes with each ' written as '\''. An empty argument is ''.
std::string shell_quoted(const std::string& word);

// The words quoted and joined by single spaces.
std::string shell_command(const std::vector<std::string>& words);

}  // namespace dualpipe

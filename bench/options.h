// The benchmarks' command lines: "--key value" pairs, each key bound to the variable it sets.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <variant>
#include <vector>

namespace dualpipe::bench {

// One option: its key and the variable its value goes to; a bool takes "on" or "off" (anything else leaves it),
// a string any text.
struct Option {
  const char* key;
  std::variant<int*, double*, bool*, std::string*> target;
};

// Reads argv's "--key value" pairs into the options' variables. An unknown key prints `usage` to stderr and
// returns false.
inline bool parse_options(int argc, char** argv, const std::vector<Option>& options, const char* usage) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    const auto option = std::find_if(options.begin(), options.end(), [&](const Option& o) { return key == o.key; });
    if (option == options.end()) {
      std::fprintf(stderr, "%s\n", usage);
      return false;
    }
    if (int* const* number = std::get_if<int*>(&option->target)) {
      **number = std::atoi(value.c_str());
    } else if (double* const* real = std::get_if<double*>(&option->target)) {
      **real = std::atof(value.c_str());
    } else if (std::string* const* text = std::get_if<std::string*>(&option->target)) {
      **text = value;
    } else if (value == "on" || value == "off") {
      *std::get<bool*>(option->target) = value == "on";
    }
  }
  return true;
}

}  // namespace dualpipe::bench

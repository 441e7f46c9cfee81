// Numbers for people, written the same way by every table, picture and progress line.
#pragma once

#include <string>

namespace dualpipe {

// printf into a string of whatever length the values need (1e308 in %f is 309 digits): no fixed buffer to cut
// a row short.
std::string formatted(const char* spec, ...) __attribute__((format(printf, 1, 2)));

// Exactly `decimals` decimals ("%.*f"): 2.50, 0.125, columns that line up.
std::string fixed(double value, int decimals);

// At most `decimals` decimals, without trailing zeros or a negative zero: 3, 2.5, 0.125.
std::string shortest_fixed(double value, int decimals = 3);

}  // namespace dualpipe

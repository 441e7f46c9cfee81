// The exit record: the last line a failing rank writes to stderr, for its launcher, when a peer rank caused the
// failure. The launcher blames ranks by it rather than by the wording of the error above it, which changes.
// The launcher reads it and does not relay it.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace dualpipe {

inline constexpr const char* kExitRecordPrefix = "dualpipe-exit-record blames=";

// "dualpipe-exit-record blames=R" (no newline).
inline std::string exit_record(int blamed_rank) { return kExitRecordPrefix + std::to_string(blamed_rank); }

// The rank an exit record blames; nullopt for any other line.
inline std::optional<int> parse_exit_record(const std::string& line) {
  const std::string prefix = kExitRecordPrefix;
  if (line.compare(0, prefix.size(), prefix) != 0 || line.size() == prefix.size() ||
      line.size() > prefix.size() + 9)
    return std::nullopt;
  char* end = nullptr;
  const long rank = std::strtol(line.c_str() + prefix.size(), &end, 10);
  if (*end != '\0' || rank < 0) return std::nullopt;
  return static_cast<int>(rank);
}

}  // namespace dualpipe

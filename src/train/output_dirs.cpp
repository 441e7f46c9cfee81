#include "output_dirs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"
#include "dualpipe/util/printable.h"

namespace dualpipe::train {

namespace fs = std::filesystem;

namespace {

// A readable name for a path of any bytes and length, as messages quote it.
std::string shown(const std::string& dir) { return printable_line(dir.substr(0, 200)); }

void check_output_dir(const char* option, const std::string& dir) {
  if (dir.empty()) return;
  DUALPIPE_REQUIRE(first_unprintable(dir) == std::string::npos, option, " '", shown(dir),
                   "' holds a control character: name the directory in printable characters");
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    DUALPIPE_REQUIRE(S_ISDIR(st.st_mode), option, " '", shown(dir), "' is ",
                     S_ISREG(st.st_mode) ? "a file" : file_type_name(st.st_mode), ", not a directory");
    DUALPIPE_REQUIRE(::access(dir.c_str(), W_OK) == 0, option, " '", shown(dir), "' is not writable: ",
                     std::strerror(errno));
    return;
  }
  DUALPIPE_REQUIRE(errno == ENOENT, option, " '", shown(dir), "' cannot be used: ", std::strerror(errno));
  // A new directory: the nearest folder above it that exists must take it.
  std::error_code error;
  fs::path above = fs::absolute(dir, error).parent_path();
  while (!above.empty() && ::stat(above.c_str(), &st) != 0 && errno == ENOENT && above != above.root_path())
    above = above.parent_path();
  DUALPIPE_REQUIRE(::stat(above.c_str(), &st) == 0 && S_ISDIR(st.st_mode), option, " '", shown(dir),
                   "' cannot be made: ", shown(above.string()), " is not a directory");
  DUALPIPE_REQUIRE(::access(above.c_str(), W_OK) == 0, option, " '", shown(dir), "' cannot be made in ",
                   shown(above.string()), ": ", std::strerror(errno));
}

std::string canonical(const std::string& path) {
  std::error_code error;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, error), error);
  return error ? path : p.string();
}

}  // namespace

void check_output_dirs(const TrainConfig& c) {
  check_output_dir("--kineto-trace", c.outputs.kineto_trace);
  check_output_dir("--stall-report-dir", c.device.stall_report_dir);
  const std::vector<std::pair<const char*, std::string>> dirs = {
      {"--kineto-trace", c.outputs.kineto_trace}, {"--stall-report-dir", c.device.stall_report_dir},
      {"--checkpoint-dir", c.checkpoint.dir}, {"--metrics", c.outputs.metrics}, {"--trace", c.outputs.trace}};
  for (std::size_t i = 0; i < 2; ++i)  // the two directories, against each other and every other output
    for (std::size_t j = 0; j < dirs.size(); ++j)
      DUALPIPE_REQUIRE(i == j || dirs[i].second.empty() || dirs[j].second.empty() ||
                           canonical(dirs[i].second) != canonical(dirs[j].second),
                       dirs[i].first, " and ", dirs[j].first, " name the same path '", shown(dirs[i].second),
                       "': give each output its own");
}

void make_output_dirs(const TrainConfig& c) {
  for (const auto& [option, dir] : {std::pair<const char*, std::string>{"--kineto-trace", c.outputs.kineto_trace},
                                    {"--stall-report-dir", c.device.stall_report_dir}}) {
    if (dir.empty()) continue;
    std::error_code error;
    fs::create_directories(dir, error);
    DUALPIPE_REQUIRE(fs::is_directory(dir), option, " '", shown(dir), "' cannot be made",
                     error ? ": " + error.message() : "");
  }
}

}  // namespace dualpipe::train

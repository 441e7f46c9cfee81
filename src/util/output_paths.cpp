#include "dualpipe/util/output_paths.h"

#include <filesystem>

#include "dualpipe/util/error.h"

namespace dualpipe {
namespace {

namespace fs = std::filesystem;

// The same file: equal once links and dots are resolved, or (for existing files) one inode under two names.
bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code error;
  if (fs::weakly_canonical(a, error) == fs::weakly_canonical(b, error)) return true;
  return fs::exists(a, error) && fs::exists(b, error) && fs::equivalent(a, b, error);
}

bool inside(const fs::path& file, const fs::path& dir) {
  std::error_code error;
  const fs::path f = fs::weakly_canonical(file, error), d = fs::weakly_canonical(dir, error);
  auto [d_end, f_at] = std::mismatch(d.begin(), d.end(), f.begin(), f.end());
  return d_end == d.end();
}

}  // namespace

void check_outputs_apart(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    if (out.path.empty()) continue;
    for (const NamedPath& in : inputs) {
      if (in.path.empty()) continue;
      std::error_code error;
      const bool is_dir = fs::is_directory(in.path, error);
      DUALPIPE_REQUIRE(!same_file(out.path, in.path), out.option, " '", out.path, "' is the file of ", in.option,
                       " '", in.path, "', which this command reads: write the output to another file");
      DUALPIPE_REQUIRE(!is_dir || !inside(out.path, in.path), out.option, " '", out.path, "' lies inside ",
                       in.option, " '", in.path, "', which this command reads: write the output elsewhere");
    }
    for (size_t j = 0; j < i; ++j)
      DUALPIPE_REQUIRE(outputs[j].path.empty() || !same_file(out.path, outputs[j].path), out.option, " '",
                       out.path, "' is also ", outputs[j].option, ": each output needs a file of its own");
  }
}

}  // namespace dualpipe

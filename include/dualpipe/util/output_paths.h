// Outputs never overwrite inputs: before a command writes anything, each output path is checked against every
// input it reads (the same file under another name or through a link included) and against the other outputs,
// and an output inside an input directory (a checkpoint directory being resumed) is refused too.
#pragma once

#include <string>
#include <vector>

namespace dualpipe {

struct NamedPath {
  std::string option;  // "--metrics", as errors name it
  std::string path;    // empty: not given, skipped
};

// Throws InvalidArgument naming both options and the path when an output is an input, lies inside an input
// directory, or is another output.
void check_outputs_apart(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs);

}  // namespace dualpipe

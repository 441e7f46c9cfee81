// The precompiled header of every target that includes LibTorch (CMakeLists.txt, dualpipe_torch_pch): LibTorch's
// headers are most of such a file's compile time, and parsing them once per build roughly halves it.
#pragma once

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

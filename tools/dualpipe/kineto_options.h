// The options that say how a PyTorch profiler trace is read, shared by `dualpipe profile` and `plan --from-kineto`:
// which kernels are communication, and which regions make each cost.
#pragma once

#include <CLI/CLI.hpp>

#include "dualpipe/sim/kineto_costs.h"
#include "dualpipe/trace/kineto.h"

namespace dualpipe::cli {

// --comm-kernel, --forward, --backward, --backward-input, --weight, --overlapped and --comm.
void add_kineto_options(CLI::App& command, KinetoReadOptions& read, KinetoCostNames& names);

}  // namespace dualpipe::cli

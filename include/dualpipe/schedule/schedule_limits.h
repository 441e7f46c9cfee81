// The bounds every schedule reader and generator keeps, so that the work and memory a request needs grow with
// the size of the input, never with a number written in it (docs/limits.md lists them and how to raise them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dualpipe {

// Readers of the text and PyTorch CSV forms.
struct ScheduleReadLimits {
  std::size_t max_bytes = std::size_t{64} << 20;       // whole input: 64 MiB
  std::size_t max_line_bytes = std::size_t{16} << 20;  // one line (one rank): 16 MiB
  int max_ranks = 4096;                                // lines holding a rank
  std::size_t max_actions = 4'000'000;                 // actions over all ranks (96 bytes of memory each)
  // Gaps in the stage or micro-batch numbers (no action uses stage 5 but one uses 7) are errors naming the
  // action above the gap. Off for fragments (the spec's one-line example); read_schedule_file turns it on,
  // since a file with a gap can never be a valid schedule.
  bool contiguous_indices = false;
};

// Generators: the memory a schedule of the requested size needs is estimated before anything is allocated.
// 1 GiB by default; ScheduleOptions::max_memory_bytes (the CLI's --max-memory) raises it.
constexpr std::int64_t kDefaultMaxScheduleMemory = std::int64_t{1} << 30;

}  // namespace dualpipe

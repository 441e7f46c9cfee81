// The table of generators. Adding a schedule: one generator file, its declaration in generators.h, one row here.
#include <algorithm>
#include <string>

#include "dualpipe/error.h"
#include "dualpipe/generators.h"

namespace dualpipe {

const std::vector<GeneratorInfo>& generators() {
  static const std::vector<GeneratorInfo> table = {
      {"gpipe", "GPipe: all forwards, then all backwards", &make_gpipe},
      {"1f1b", "1F1B (DAPPLE/Megatron): warm-up forwards, then one forward one backward", &make_1f1b},
      {"interleaved-1f1b", "Megatron interleaved 1F1B: v looped stages per rank (--stages-per-rank, default 2)",
       &make_interleaved_1f1b},
      {"zb-h1", "Zero Bubble ZB-H1: 1F1B memory, split backward, W fills the bubbles", &make_zb_h1},
      {"zb-h2", "Zero Bubble ZB-H2: more warm-up forwards, near-zero bubble, 2x activations", &make_zb_h2},
      {"zbv", "Zero Bubble V: two stages per rank in a V, handcrafted order", &make_zbv},
      {"chimera", "Chimera: two 1F1B pipelines in opposite directions, merged", &make_chimera},
      {"dualpipe", "DualPipe (DeepSeek-V3): bidirectional, overlapped F&B, split backward", &make_dualpipe},
      {"dualpipev", "DualPipeV: DualPipe folded into a V on half the ranks", &make_dualpipev},
  };
  return table;
}

// Peak memory per (stage, micro-batch) pair of `dualpipe schedule --lower` (generate, validate, lower, format),
// measured as the growth of the peak resident size between two sizes of every kind (docs/limits.md), rounded up.
constexpr double kBytesPerStageMicrobatch = 400;  // measured 300-370 (R=32, M=2000 and 4000)

double estimate_schedule_bytes(std::string_view kind, const ScheduleOptions& options) {
  // Stages per rank: two for the V-shaped kinds, the requested count (or at least the default 2) for
  // interleaved 1F1B, one otherwise.
  double per_rank = 1;
  if (kind == "zbv" || kind == "dualpipev") per_rank = 2;
  if (kind == "interleaved-1f1b") per_rank = std::max(2, options.stages_per_rank);
  return kBytesPerStageMicrobatch * per_rank * std::max(options.num_ranks, 0) *
         static_cast<double>(std::max(options.num_microbatches, 0));
}

Schedule make_schedule(std::string_view kind, const ScheduleOptions& options) {
  std::string known;
  for (const GeneratorInfo& g : generators()) {
    if (g.name != kind) {
      known += known.empty() ? "" : ", ";
      known += g.name;
      continue;
    }
    const double estimate = estimate_schedule_bytes(kind, options);
    DUALPIPE_REQUIRE(estimate <= static_cast<double>(options.max_memory_bytes), kind, " with R=",
                     options.num_ranks, " ranks and M=", options.num_microbatches, " micro-batches needs about ",
                     describe_bytes(estimate), " of memory, above the limit of ",
                     describe_bytes(static_cast<double>(options.max_memory_bytes)),
                     " (raise it with --max-memory)");
    return g.make(options);
  }
  throw InvalidArgument(detail::concat("unknown schedule kind '", kind, "' (known kinds: ", known, ")"));
}

}  // namespace dualpipe

// The table of generators. Adding a schedule: one generator file, its declaration in generators.h, one row here.
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

Schedule make_schedule(std::string_view kind, const ScheduleOptions& options) {
  std::string known;
  for (const GeneratorInfo& g : generators()) {
    if (g.name == kind) return g.make(options);
    known += known.empty() ? "" : ", ";
    known += g.name;
  }
  throw InvalidArgument(detail::concat("unknown schedule kind '", kind, "' (known kinds: ", known, ")"));
}

}  // namespace dualpipe

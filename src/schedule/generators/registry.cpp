// The table of generators. Adding a schedule: one generator file, its declaration in generators.h, one row here.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "dualpipe/schedule/generators.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/error.h"

namespace dualpipe {

const std::vector<GeneratorInfo>& generators() {
  static const std::vector<GeneratorInfo> table = {
      // name, summary, generator, stages per rank, placement
      {"gpipe", "GPipe: all forwards, then all backwards", &make_gpipe, 1, "linear"},
      {"1f1b", "1F1B (DAPPLE/Megatron): warm-up forwards, then one forward one backward", &make_1f1b, 1, "linear"},
      {"interleaved-1f1b", "Megatron interleaved 1F1B: v looped stages per rank (--stages-per-rank, default 2)",
       &make_interleaved_1f1b, 0, "looped"},
      {"combined-1f1b",
       "Megatron-Core combined 1F1B: interleaved 1F1B whose steady F and B run as one overlapped unit (MoE a2a)",
       &make_combined_1f1b, 0, "looped"},
      {"zb-h1", "Zero Bubble ZB-H1: 1F1B memory, split backward, W fills the bubbles", &make_zb_h1, 1, "linear"},
      {"zb-h2", "Zero Bubble ZB-H2: more warm-up forwards, near-zero bubble, 2x activations", &make_zb_h2, 1,
       "linear"},
      {"zbv", "Zero Bubble V: two stages per rank in a V, handcrafted order", &make_zbv, 2, "v"},
      {"chimera", "Chimera: two 1F1B pipelines in opposite directions, merged", &make_chimera, 1, "two"},
      {"dualpipe", "DualPipe (DeepSeek-V3): bidirectional, overlapped F&B, split backward", &make_dualpipe, 1, "two"},
      {"dualpipev", "DualPipeV: DualPipe folded into a V on half the ranks", &make_dualpipev, 2, "v"},
  };
  return table;
}

namespace {

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Insertions, deletions and substitutions that turn `a` into `b`, for "did you mean".
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "unknown schedule kind 'dualpip' (did you mean 'dualpipe'? known kinds: gpipe, ...)".
std::string unknown_kind(std::string_view kind) {
  std::string known, closest;
  std::size_t best = std::string::npos;
  for (const GeneratorInfo& g : generators()) {
    known += (known.empty() ? "" : ", ") + std::string(g.name);
    const std::size_t d = edit_distance(lowercase(kind), std::string(g.name));
    if (d < best) best = d, closest = g.name;
  }
  // Close enough to be a slip: at most 2 edits, and at most a third of the name.
  const bool slip = best <= 2 && best * 3 <= closest.size();
  return detail::concat("unknown schedule kind '", kind, "' (", slip ? "did you mean '" + closest + "'? " : "",
                        "known kinds: ", known, ")");
}

}  // namespace

const GeneratorInfo* find_generator(std::string_view kind) {
  const std::string wanted = lowercase(kind);
  for (const GeneratorInfo& g : generators())
    if (g.name == wanted) return &g;
  return nullptr;
}

// Peak memory per (stage, micro-batch) pair of `dualpipe schedule --lower` (generate, validate, lower, format),
// measured as the growth of the peak resident size between two sizes of every kind (docs/limits.md), rounded up.
constexpr double kBytesPerStageMicrobatch = 400;  // measured 300-370 (R=32, M=2000 and 4000)

double estimate_schedule_bytes(std::string_view kind, const ScheduleOptions& options) {
  // Stages per rank: the generator's, or the requested count (at least the default 2) where the caller picks it.
  double per_rank = 1;
  if (const GeneratorInfo* g = find_generator(kind))
    per_rank = g->stages_per_rank > 0 ? g->stages_per_rank : std::max(2, options.stages_per_rank);
  return kBytesPerStageMicrobatch * per_rank * std::max(options.num_ranks, 0) *
         static_cast<double>(std::max(options.num_microbatches, 0));
}

Schedule make_schedule(std::string_view kind, const ScheduleOptions& options) {
  const GeneratorInfo* g = find_generator(kind);
  if (!g) throw InvalidArgument(unknown_kind(kind));
  const double estimate = estimate_schedule_bytes(g->name, options);
  DUALPIPE_REQUIRE(estimate <= static_cast<double>(options.max_memory_bytes), g->name, " with R=", options.num_ranks,
                   " ranks and M=", options.num_microbatches, " micro-batches needs about ", describe_bytes(estimate),
                   " of memory, above the limit of ", describe_bytes(static_cast<double>(options.max_memory_bytes)),
                   " (raise it with --max-memory)");
  return g->make(options);
}

}  // namespace dualpipe

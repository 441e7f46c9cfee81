#include "dualpipe/sim/kineto_costs.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <regex>
#include <set>

#include "action_gaps.h"
#include "dualpipe/trace/name_pattern.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/median.h"

namespace dualpipe {

namespace {

// The kinds of region a cost is read from, in the order a region is tried: a region is read as the first whose
// pattern it matches, so a pair region is never also a forward.
enum Kind { Pair, Input, Weight, Backward, Forward, Message, Update, kKinds };
constexpr std::array<const char*, kKinds> kOption = {"--overlapped", "--backward-input", "--weight", "--backward",
                                                     "--forward",    "--comm",           "--update"};
constexpr int kMaxStageTag = 1 << 16;

// A name ending in " stage N" is stage N's; -1 without one.
std::pair<std::string, int> split_stage(const std::string& name) {
  const std::string tag = " stage ";
  const std::size_t at = name.rfind(tag);
  const std::size_t digits = at == std::string::npos ? 0 : name.size() - at - tag.size();
  if (digits == 0 || digits > 5) return {name, -1};
  int stage = 0;
  for (std::size_t i = at + tag.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return {name, -1};
    stage = stage * 10 + (name[i] - '0');
  }
  if (stage >= kMaxStageTag) return {name, -1};
  return {name.substr(0, at), stage};
}

std::optional<std::regex> compile(const std::string& pattern, const char* option) {
  if (pattern.empty()) return std::nullopt;
  return compile_name_pattern(pattern, option);
}

double mean_of(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

// One region name's occurrences over every rank read.
struct Occurrences {
  std::string name;
  std::vector<double> durations;
  double compute = 0, communication = 0;  // summed over the occurrences
  int count() const { return static_cast<int>(durations.size()); }
};

// The regions of one kind on one stage.
struct Group {
  std::vector<Occurrences> names;  // in order of first appearance

  bool empty() const { return names.empty(); }
  bool phases() const { return names.size() > 1; }
  int count() const {
    int n = 0;
    for (const Occurrences& o : names) n += o.count();
    return n;
  }
  void add(const KinetoRegion& region) {
    auto it = std::find_if(names.begin(), names.end(), [&](const Occurrences& o) { return o.name == region.name; });
    if (it == names.end()) it = names.insert(names.end(), Occurrences{region.name, {}, 0, 0});
    it->durations.insert(it->durations.end(), region.durations.begin(), region.durations.end());
    it->compute += region.mean_compute * region.count;
    it->communication += region.mean_communication * region.count;
  }
  // One action's time: the mean occurrence of its one name (a step adds the actions' times up, slow ones
  // included, which a median would leave out); or, for the phases of a chunk (several names), their work summed and
  // divided by the chunks.
  double time(int chunks) const {
    if (!phases()) return mean_of(names[0].durations);
    double compute = 0;
    for (const Occurrences& o : names) compute += o.compute;
    return compute / chunks;
  }
  double communication(int chunks) const {
    double total = 0;
    for (const Occurrences& o : names) total += o.communication;
    return total / chunks;
  }
  const char* measure() const { return phases() ? "compute per chunk" : "mean duration"; }
};

using Groups = std::map<int, Group>;  // by stage; -1: the regions without a stage

// The first 20 names, then how many more: a trace may hold thousands (an error listed 148 KB of them).
std::string region_list(const std::vector<const KinetoSummary*>& ranks) {
  constexpr std::size_t kListed = 20;
  std::vector<std::string> names;
  std::size_t total = 0;
  std::set<std::string> seen;
  for (const KinetoSummary* summary : ranks)
    for (const KinetoRegion& r : summary->regions)
      if (seen.insert(r.name).second && ++total <= kListed) names.push_back(r.name);
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  if (total > kListed) text += " and " + std::to_string(total - kListed) + " more";
  return text.empty() ? "none" : text;
}

std::array<std::string, kKinds> patterns_of(const KinetoCostNames& names) {
  return {names.overlapped, names.backward_input, names.weight, names.backward,
          names.forward,    names.comm,           names.update};
}

using Patterns = std::array<std::optional<std::regex>, kKinds>;

Patterns compile_all(const KinetoCostNames& names) {
  const std::array<std::string, kKinds> patterns = patterns_of(names);
  Patterns compiled;
  for (int k = 0; k < kKinds; ++k) compiled[k] = compile(patterns[k], kOption[k]);
  return compiled;
}

// The kind a region of this name is read as (kKinds: none).
int kind_of(const Patterns& patterns, const std::string& name) {
  const std::string base = split_stage(name).first;
  for (int k = 0; k < kKinds; ++k)
    if (patterns[k] && std::regex_search(base, *patterns[k])) return k;
  return kKinds;
}

class Reader {
 public:
  Reader(const std::vector<const KinetoSummary*>& ranks, const KinetoCostNames& names,
         const std::vector<const KinetoSummary*>& timeline)
      : ranks_(ranks), timeline_(timeline), patterns_(patterns_of(names)), regex_(compile_all(names)) {
    for (const KinetoSummary* summary : ranks) {
      // Each rank's update apart: the least of their medians is the update of the rank that waited for no one.
      std::vector<double> update;
      for (const KinetoRegion& region : summary->regions)
        if (classify(region) == Update) update.insert(update.end(), region.durations.begin(), region.durations.end());
      rank_updates_.push_back(update.empty() ? 0 : median(update));
      if (!update.empty()) least_update_ = std::min(least_update_.value_or(rank_updates_.back()), rank_updates_.back());
    }
  }

  KinetoCosts read() {
    for (Kind k : {Forward, Backward})
      if (!any(k) && (k == Forward || !any(Input)))
        throw InvalidArgument(detail::concat("no region matches ", kOption[k], " '", patterns_[k],
                                             "'; the trace's record_function regions: ", region_list(ranks_)));
    const std::vector<int> stages = stages_read();
    StageCosts per;
    for (int s : stages) read_stage(s, per);
    say_assumed_weights(per.assumed_w, stages.size());
    CostModel& c = out_.costs;
    c.forward = mean_of(per.f);
    c.backward = mean_of(per.b);
    c.weight = mean_of(per.w);
    if (stages.size() > 1) c.stage_forward = per.f, c.stage_backward = per.b, c.stage_weight = per.w;
    out_.stages = stages.front() < 0 ? 0 : static_cast<int>(stages.size());
    note("F", c.forward, per_stage(per.f_measure, stages), {Forward}, &stages);
    note("B", c.backward, per_stage(per.b_measure, stages), {Backward, Input, Weight}, &stages);
    note("W", c.weight, per_stage(per.w_measure, stages), {Weight}, &stages);
    if (per.input_apart) {
      c.input = mean_of(per.i);
      if (stages.size() > 1) c.stage_input = per.i;
      note("I", *c.input, per_stage(per.i_measure, stages), {Input}, &stages);
    }
    if (mean_of(per.a2a) > 0) {
      c.all_to_all = mean_of(per.a2a);
      note("a2a", c.all_to_all, "communication per chunk", {Forward}, &stages);
    }
    if (const std::optional<double> fb = mean_of_every_stage(Pair)) {
      c.overlapped = *fb;
      note("FB", *fb, "mean duration", {Pair});
    }
    if (const std::optional<double> comm = mean_of_every_stage(Message)) {
      c.comm = *comm;
      note("comm", *comm, "mean duration", {Message});
    }
    // Whole actions only: between the phases of a chunk (several names) there is no host's work to read.
    const auto is_action = [&](const std::string& name) {
      const int k = kind_of(name);
      const bool compute = k == Pair || k == Input || k == Weight || k == Backward || k == Forward;
      return compute && !group(static_cast<Kind>(k), split_stage(name).second).phases();
    };
    if (const std::optional<double> gap = host_gap_between_actions(timeline_, is_action)) {
      c.gap = *gap;
      note("gap", *gap, "lower quartile of a rank's gaps between its actions, median of the ranks",
           {Forward, Backward, Input, Weight, Pair});
    }
    if (least_update_) {
      out_.rank_updates = rank_updates_;
      out_.update = *least_update_;
      note("update", out_.update,
           "the least of the ranks' medians (in a traced run's step, each rank's own after its last action)",
           {Update});
    }
    c.check();
    std::vector<std::string> unique;  // a per-stage assumption is said once
    for (const std::string& w : out_.warnings)
      if (std::find(unique.begin(), unique.end(), w) == unique.end()) unique.push_back(w);
    out_.warnings = std::move(unique);
    return std::move(out_);
  }

 private:
  // F, B, W and a2a of each stage read, and how each was measured.
  struct StageCosts {
    std::vector<double> f, b, w, i, a2a;
    std::vector<std::string> f_measure, b_measure, w_measure, i_measure;
    bool input_apart = false;  // a stage ran both whole backwards and split ones: its I read apart from B - W
    std::vector<int> assumed_w;  // stages without weight regions
  };

  void read_stage(int s, StageCosts& per) {
    const int chunks = chunks_of(s);
    const Group& forward = group(Forward, s);
    per.f.push_back(forward.time(chunks));
    per.f_measure.push_back(forward.measure());
    per.a2a.push_back(forward.phases() ? forward.communication(chunks) : 0);
    const bool has_w = !group(Weight, s).empty();
    double w = has_w ? group(Weight, s).time(chunks) : 0, b = 0;
    std::string w_measure = has_w ? group(Weight, s).measure() : "B/2 (assumed)", b_measure;
    if (!group(Backward, s).empty()) {
      // A backward beside weight regions and no input-gradient ones is the input-gradient part.
      const bool split = has_w && !any(Input);
      b = group(Backward, s).time(chunks) + (split ? w : 0);
      b_measure = split ? "B + W" : group(Backward, s).measure();
    } else {
      b = group(Input, s).time(chunks) + w;
      b_measure = has_w ? "I + W" : group(Input, s).measure();
    }
    if (!has_w) w = b / 2, per.assumed_w.push_back(s);
    if (w > b) {
      out_.warnings.push_back(detail::concat("stage ", s, "'s W (", w, " us) above its B (", b, " us): W taken as B"));
      w = b;
    }
    // A split backward costs more than a whole one (its input half walks the graph and keeps the weight nodes'
    // gradients): beside whole backwards, I is its own regions' time, not B - W.
    const bool input_apart = has_w && !group(Backward, s).empty() && !group(Input, s).empty();
    per.i.push_back(input_apart ? group(Input, s).time(chunks) : b - w);
    per.i_measure.push_back(input_apart ? group(Input, s).measure() : "B - W");
    per.input_apart = per.input_apart || input_apart;
    per.b.push_back(b);
    per.w.push_back(w);
    per.b_measure.push_back(b_measure);
    per.w_measure.push_back(w_measure);
  }

  void say_assumed_weights(const std::vector<int>& assumed, std::size_t stages) {
    if (assumed.empty()) return;
    if (assumed.size() == stages) {
      out_.warnings.push_back(detail::concat("no region matches --weight '", patterns_[Weight],
                                             "': W taken as half of B"));
      return;
    }
    std::string list;
    for (int s : assumed) list += (list.empty() ? "" : ", ") + std::to_string(s);
    const bool one = assumed.size() == 1;
    out_.warnings.push_back(detail::concat(one ? "stage " : "stages ", list, one ? " has" : " have",
                                           " no region matching --weight '", patterns_[Weight], "' (",
                                           one ? "it ran" : "they ran", " whole backwards): W taken as half of B"));
  }

  // The mean of every occurrence of a kind's regions, whatever their stage; none without any.
  std::optional<double> mean_of_every_stage(Kind k) const {
    std::vector<double> durations;
    for (const auto& [stage, g] : groups_[k])
      for (const Occurrences& o : g.names) durations.insert(durations.end(), o.durations.begin(), o.durations.end());
    if (durations.empty()) return std::nullopt;
    return mean_of(durations);
  }

  int kind_of(const std::string& name) const { return dualpipe::kind_of(regex_, name); }
  // The same, and the region added to its kind's group.
  int classify(const KinetoRegion& region) {
    const int k = kind_of(region.name);
    if (k < kKinds) groups_[k][split_stage(region.name).second].add(region);
    return k;
  }

  const Group& group(Kind k, int stage) const {
    static const Group none;
    const auto it = groups_[k].find(stage);
    return it == groups_[k].end() ? none : it->second;
  }
  bool any(Kind k) const { return !groups_[k].empty(); }

  // The stages whose costs are read: 0 to S-1 where forward regions name their stages, else one (-1).
  std::vector<int> stages_read() {
    std::set<int> named;
    for (const auto& [stage, g] : groups_[Forward])
      if (stage >= 0) named.insert(stage);
    if (named.empty()) {
      DUALPIPE_REQUIRE(!group(Backward, -1).empty() || !group(Input, -1).empty(), "the forward regions name no stage "
                       "but the backward regions all do (\" stage N\"): name the stages of both or of neither");
      return {-1};
    }
    if (!group(Forward, -1).empty())
      out_.warnings.push_back("forward regions without a stage (\" stage N\") are not read beside those with one");
    std::vector<int> stages;
    for (int s = 0; s <= *named.rbegin(); ++s) {
      const bool has_backward = !group(Backward, s).empty() || !group(Input, s).empty();
      DUALPIPE_REQUIRE(named.count(s) && has_backward, "the regions name stages up to ", *named.rbegin(),
                       " but stage ", s, " has no ", named.count(s) ? "backward" : "forward", " region (",
                       named.count(s) ? "--backward or --backward-input" : "--forward", ")");
      stages.push_back(s);
    }
    return stages;
  }

  // How many chunks a stage's phases make up: its chunk pairs (DualPipe's pair region holds a forward and a
  // backward chunk), else the fewest occurrences of one phase.
  int chunks_of(int stage) {
    if (const Group& pairs = group(Pair, stage); !pairs.empty()) return pairs.count();
    const Group& forward = group(Forward, stage);
    if (!forward.phases()) return 1;
    int fewest = forward.names[0].count();
    for (const Occurrences& o : forward.names) fewest = std::min(fewest, o.count());
    out_.warnings.push_back(detail::concat("no region matches --overlapped '", patterns_[Pair],
                                           "' to count the chunks: each phase taken to run once per chunk (",
                                           fewest, " chunks)"));
    return fewest;
  }

  // `stages`: the stages whose regions were read; null: all.
  void note(const char* cost, double value, std::string measure, std::initializer_list<Kind> kinds,
            const std::vector<int>* stages = nullptr) {
    KinetoCostSource source{cost, value, std::move(measure), {}, 0};
    for (Kind k : kinds)
      for (const auto& [stage, g] : groups_[k]) {
        if (stages && std::find(stages->begin(), stages->end(), stage) == stages->end()) continue;
        for (const Occurrences& o : g.names) {
          source.regions.push_back(o.name);
          source.occurrences += o.count();
        }
      }
    out_.sources.push_back(std::move(source));
  }

  // One measure, or each stage's where they differ ("stage 0: I + W; stage 1: mean duration").
  static std::string per_stage(const std::vector<std::string>& measures, const std::vector<int>& stages) {
    if (std::all_of(measures.begin(), measures.end(), [&](const std::string& m) { return m == measures[0]; }))
      return measures[0];
    std::string text;
    for (std::size_t i = 0; i < measures.size(); ++i)
      text += detail::concat(i ? "; " : "", "stage ", stages[i], ": ", measures[i]);
    return text;
  }


  const std::vector<const KinetoSummary*>& ranks_;
  const std::vector<const KinetoSummary*>& timeline_;  // for the gaps between actions
  std::array<std::string, kKinds> patterns_;
  Patterns regex_;
  std::array<Groups, kKinds> groups_;
  std::vector<double> rank_updates_;  // each rank's median update (0 without any)
  std::optional<double> least_update_;  // the least of those of the ranks with any
  KinetoCosts out_;
};

}  // namespace

void KinetoCostNames::check() const { compile_all(*this); }

std::function<bool(const std::string&)> work_regions(const KinetoCostNames& names) {
  return [patterns = compile_all(names)](const std::string& name) {
    const int k = kind_of(patterns, name);
    return k != Message && k != kKinds;
  };
}

std::function<bool(const std::string&)> compute_regions(const KinetoCostNames& names) {
  return [patterns = compile_all(names)](const std::string& name) {
    const int k = kind_of(patterns, name);
    return k != Message && k != Update && k != kKinds;
  };
}

KinetoCosts costs_from_kineto(const std::vector<const KinetoSummary*>& ranks, const KinetoCostNames& names,
                              const std::vector<const KinetoSummary*>* as_measured) {
  return Reader(ranks, names, as_measured ? *as_measured : ranks).read();
}

KinetoCosts costs_from_kineto(const KinetoSummary& summary, const KinetoCostNames& names) {
  return costs_from_kineto(std::vector<const KinetoSummary*>{&summary}, names);
}

std::string cost_source_text(const KinetoCostSource& source) {
  char value[64];
  std::snprintf(value, sizeof value, "%.3f", source.value);
  std::string text = source.cost + " = " + value + " us: " + source.measure;
  if (source.regions.empty()) return text;
  constexpr std::size_t kListed = 8;
  text += " (" + std::to_string(source.occurrences) + (source.occurrences == 1 ? " region: " : " regions: ");
  for (std::size_t i = 0; i < std::min(kListed, source.regions.size()); ++i)
    text += (i ? ", " : "") + source.regions[i];
  if (source.regions.size() > kListed) text += " and " + std::to_string(source.regions.size() - kListed) + " more";
  return text + ")";
}

}  // namespace dualpipe

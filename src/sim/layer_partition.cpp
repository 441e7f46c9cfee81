#include "dualpipe/sim/layer_partition.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"

namespace dualpipe {
namespace {

std::vector<std::string> split_fields(std::string_view line) {
  std::vector<std::string> out;
  std::string field;
  for (char c : line) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\r') {
      if (!field.empty()) out.push_back(field), field.clear();
    } else {
      field += c;
    }
  }
  if (!field.empty()) out.push_back(field);
  return out;
}

bool is_number(const std::string& field) {
  char* end = nullptr;
  std::strtod(field.c_str(), &end);
  return end == field.c_str() + field.size();
}

}  // namespace

std::vector<LayerCost> read_layer_costs(const std::string& path) {
  return parse_layer_costs(read_file_within(path, 64u << 20, "layer-cost tables"), path);
}

std::vector<LayerCost> parse_layer_costs(std::string_view text, const std::string& source) {
  std::vector<LayerCost> layers;
  int line_number = 0;
  bool first = true;
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++line_number;
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    const std::vector<std::string> fields = split_fields(line);
    if (fields.empty()) continue;
    // A header names the columns: words only. A row with any number in it is data ("nan 2 1 100" is a row with
    // a value that is not finite, not a header to skip).
    if (first && std::none_of(fields.begin(), fields.end(), is_number)) {
      first = false;
      continue;
    }
    first = false;
    DUALPIPE_REQUIRE(fields.size() == 4, source, ":", line_number, ": expected 4 values (F B W act_bytes), got ",
                     fields.size());
    double v[4];
    for (int i = 0; i < 4; ++i) {
      char* end = nullptr;
      v[i] = std::strtod(fields[i].c_str(), &end);
      DUALPIPE_REQUIRE(end == fields[i].c_str() + fields[i].size() && std::isfinite(v[i]), source, ":", line_number,
                       ": '", fields[i], "' is not a finite number");
    }
    const LayerCost l{v[0], v[1], v[2], v[3]};
    DUALPIPE_REQUIRE(l.forward > 0 && l.backward > 0, source, ":", line_number, ": F and B must be positive, got F=",
                     l.forward, " B=", l.backward);
    DUALPIPE_REQUIRE(l.weight >= 0 && l.weight <= l.backward, source, ":", line_number,
                     ": W is part of B, so 0 <= W <= B, got W=", l.weight, " with B=", l.backward);
    DUALPIPE_REQUIRE(l.activation_bytes >= 0, source, ":", line_number, ": act_bytes must not be negative, got ",
                     l.activation_bytes);
    layers.push_back(l);
    DUALPIPE_REQUIRE(layers.size() <= 100000, source, ": more than 100000 layers");
  }
  DUALPIPE_REQUIRE(!layers.empty(), source, ": no layers (one line per layer: F B W act_bytes)");
  return layers;
}

std::vector<int> balanced_cut(const std::vector<LayerCost>& layers, int num_stages) {
  const int L = static_cast<int>(layers.size()), S = num_stages;
  DUALPIPE_REQUIRE(S >= 1 && L >= S, "cutting ", L, " layers into ", S, " stages needs at least one layer per stage");
  std::vector<double> time(L + 1, 0.0), bytes(L + 1, 0.0);  // prefix sums
  for (int l = 0; l < L; ++l) {
    time[l + 1] = time[l] + layers[l].forward + layers[l].backward;
    bytes[l + 1] = bytes[l] + layers[l].activation_bytes;
  }
  // Two passes of the same dynamic programme over (stages, layers): the least slowest-stage time T, then the least
  // largest activation among cuts whose stages all take at most T (a lexicographic pass would not be exact).
  const double inf = std::numeric_limits<double>::infinity();
  const auto solve = [&](const std::vector<double>& sums, double cap, std::vector<std::vector<int>>* from) {
    std::vector<std::vector<double>> best(S + 1, std::vector<double>(L + 1, inf));
    best[0][0] = 0;
    for (int s = 1; s <= S; ++s) {
      for (int l = s; l <= L - (S - s); ++l) {
        for (int k = s - 1; k < l; ++k) {
          if (best[s - 1][k] == inf || time[l] - time[k] > cap) continue;
          const double c = std::max(best[s - 1][k], sums[l] - sums[k]);
          if (c < best[s][l]) {
            best[s][l] = c;
            if (from) (*from)[s][l] = k;
          }
        }
      }
    }
    return best[S][L];
  };
  const double slowest = solve(time, inf, nullptr);
  std::vector<std::vector<int>> from(S + 1, std::vector<int>(L + 1, -1));
  solve(bytes, slowest * (1 + 1e-12), &from);
  std::vector<int> cut(S);
  for (int s = S, l = L; s > 0; --s) {
    const int k = from[s][l];
    cut[s - 1] = l - k;
    l = k;
  }
  return cut;
}

std::vector<int> speed_balanced_cut(const std::vector<LayerCost>& layers, const Placement& placement,
                                    int num_microbatches, const std::vector<double>& rank_speed) {
  const int S = placement.num_stages(), R = placement.num_ranks();
  DUALPIPE_REQUIRE(static_cast<int>(rank_speed.size()) == R, "--rank-speed has ", rank_speed.size(),
                   " values for a pipeline of ", R, " ranks; give one per rank");
  std::vector<int> cut = balanced_cut(layers, S);
  // runs[r][s]: the micro-batches for which rank r runs stage s.
  std::vector<std::vector<double>> runs(R, std::vector<double>(S, 0.0));
  for (int m = 0; m < num_microbatches; ++m)
    for (int s = 0; s < S; ++s) runs[placement.rank(s, m)][s] += 1;
  const auto loads = [&](const std::vector<int>& c) {
    std::vector<double> stage(S, 0.0), rank(R, 0.0);
    for (int s = 0, l = 0; s < S; ++s)
      for (int k = 0; k < c[s]; ++k, ++l) stage[s] += layers[l].forward + layers[l].backward;
    for (int r = 0; r < R; ++r) {
      for (int s = 0; s < S; ++s) rank[r] += runs[r][s] * stage[s];
      rank[r] /= rank_speed[r];
    }
    std::sort(rank.rbegin(), rank.rend());  // compared busiest first: the max, then the next, ...
    return rank;
  };
  std::vector<double> best = loads(cut);
  for (bool moved = true; moved;) {
    moved = false;
    for (int b = 0; b + 1 < S; ++b)  // the boundary after stage b, one layer either way
      for (const int from : {b, b + 1}) {
        const int to = from == b ? b + 1 : b;
        if (cut[from] <= 1) continue;
        std::vector<int> next = cut;
        --next[from], ++next[to];
        const std::vector<double> l = loads(next);
        if (l < best) best = l, cut = std::move(next), moved = true;
      }
  }
  return cut;
}

CostModel costs_of_cut(const std::vector<LayerCost>& layers, const std::vector<int>& cut, int num_ranks,
                       const CostModel& base) {
  const int S = static_cast<int>(cut.size());
  CostModel c = base;
  c.stage_scale.clear();
  c.stage_forward.assign(S, 0);
  c.stage_backward.assign(S, 0);
  c.stage_weight.assign(S, 0);
  c.stage_activation.assign(S, 0);
  double total_bytes = 0;
  std::size_t l = 0;
  for (int s = 0; s < S; ++s) {
    for (int i = 0; i < cut[s]; ++i, ++l) {
      DUALPIPE_CHECK(l < layers.size(), "the cut has more layers than the model");
      c.stage_forward[s] += layers[l].forward;
      c.stage_backward[s] += layers[l].backward;
      c.stage_weight[s] += layers[l].weight;
      c.stage_activation[s] += layers[l].activation_bytes;
      total_bytes += layers[l].activation_bytes;
    }
  }
  const auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  c.forward = mean(c.stage_forward);
  c.backward = mean(c.stage_backward);
  c.weight = mean(c.stage_weight);
  // The unit of a cut into S stages is a nominal stage activation, R/S of a 1/R slice's (total / S bytes), as for
  // uniform stages; each stage's size is its bytes over that.
  (void)num_ranks;
  const double nominal = total_bytes / S;
  c.activation_bytes = nominal;
  if (nominal > 0) {
    for (double& a : c.stage_activation) a /= nominal;
  } else {
    c.stage_activation.clear();
  }
  return c;
}

std::string format_cut(const std::vector<int>& cut) {
  std::string out;
  for (int n : cut) out += (out.empty() ? "" : ",") + std::to_string(n);
  return out;
}

}  // namespace dualpipe

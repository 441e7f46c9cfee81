// Per-action costs for the simulator (spec section 2) and the activation-memory model. Time units are
// arbitrary; the memory unit is one stage's activations for one micro-batch.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dualpipe/schedule/action.h"

namespace dualpipe {

enum class PairMode { Phases, Threads, Off };
const char* pair_mode_name(PairMode mode);  // as the cost key pair= takes it

struct CostModel {
  double forward = 1;   // F: forward of one stage
  double backward = 2;  // B: full backward (input and weight gradients)
  double weight = 1;    // W: weight-gradient part of B, so I = B - W
  // I: the input-gradient half of a split backward, where it is measured apart from B - W (a split costs more than
  // a whole backward: the input half walks the graph and keeps the weight nodes' gradients for W); unset: B - W.
  std::optional<double> input;
  std::optional<double> overlapped;  // FB: one overlapped F&B pair; F + B (or with a2a, see below) when unset
  double comm = 0;      // latency added to every cross-rank dependency
  // gap: the host's time between two of a rank's compute actions (posting its messages' sends and receives, the
  // runtime's bookkeeping), after the first ends and before the second can start; not scaled per stage (an
  // action's overhead). What a measured run adds to the compute and the waits (plan --from-kineto fits it). The
  // planner's list scheduler and exact search order actions without it; every candidate is then simulated with it.
  double gap = 0;
  // a2a: the expert all-to-all time of one stage's forward (the sum of its MoE layers' dispatches and combines;
  // its backward exchanges as much again), scaled per stage like F. A forward or I takes that much longer (it
  // waits for its own exchanges), a W does not, a B as `pair` says. An overlapped pair without FB hides each
  // half's exchanges behind the other half's compute, DualPipe's point: it is timed phase by phase
  // (sim/phase_pair.h), its halves' chains of `layers` MoE layers interleaved as the runtime runs them, the
  // exchanges sharing the rank's link.
  double all_to_all = 0;
  // a2a_latency: of each exchange (a2a / (2 x layers) long), the part that is not its bytes on the rank's link (the
  // peer's start, the transport's round trips): exchanges under way at once in a pair share the link but not that.
  // Unset: 0, every exchange all bytes.
  std::optional<double> all_to_all_latency;
  int layers = 1;  // MoE layers of one 1/R slice (a stage of an S-stage schedule holds R/S of them, at least one)
  // How the runtime runs a pair (train's --fb-overlap-mode, --no-fb-overlap). pair=phases, the default: phase by
  // phase on one thread (sim/phase_pair.h's time_phased_pair), and a lone B as its chain of phases alone, its experts'
  // W under way with the dispatch's gradient. pair=threads: the pair's halves on two threads at once, each waiting
  // for its exchanges where it starts them (time_threaded_pair). pair=off: a pair is its forward, then its
  // backward, each waiting for its exchanges. With threads or off a lone B waits for its exchanges whole.
  PairMode pair = PairMode::Phases;
  // The data-parallel collectives of one stage (schedule/data_parallel_lowering.h), on the rank's data-parallel
  // link beside its compute, scaled per stage like F: unshard gathers its ZeRO-3 parameters (an UNSHARD), reduce
  // reduces its gradients over the replicas (a REDUCE_GRAD). A RESHARD takes no time.
  double unshard = 0;
  double reduce = 0;
  std::vector<double> stage_scale;   // per-stage multipliers of all costs; empty means 1 for every stage
  // Per-stage absolute costs for uneven stages ("F=2:1:1:1.5"): F, B and W of each stage; empty: forward, backward
  // and weight for every stage. When given, forward/backward/weight hold their means (FB is given for a pair of
  // mean stages and scaled like the separate halves).
  std::vector<double> stage_forward, stage_backward, stage_weight;
  std::vector<double> stage_input;  // I of each stage ("I=..." per stage); empty: `input`, or B - W without it
  // Per pipeline rank: how fast it computes against the costs above (1: as costed; 0.67: every compute action
  // takes 1.5 times as long there, a throttled GPU or a noisy neighbour); empty: every rank at 1. Communication and
  // the data-parallel collectives are not slowed. `--rank-speed 1,1,0.67,1` of plan, simulate and compare.
  std::vector<double> rank_speed;
  // act_scale: the size of each stage's activation in units (an embedding stage's may be larger); empty: 1.
  std::vector<double> stage_activation;
  // act_bytes: bytes of one stage's activations for one micro-batch (the simulator's memory unit), measured for
  // your model (for example the runtime's peak_activation_bytes of a one-micro-batch step); 0: not given.
  double activation_bytes = 0;

  // The memory model (activation_memory.h). w_mem: the share of a stage's activation that an I keeps for its W
  // (1: all of it, the accounting of spec section 2; the Zero Bubble paper's M_W/M_B = 32h/(34h+5as) frees
  // the rest at I).
  double w_mem = 1;
  // Activation recomputation: a forward keeps only its stage input (input_mem of the unit) and every backward
  // (B, I, the backward half of a pair) first re-runs the forward, taking F longer.
  bool recompute = false;
  // The share of a stage's activation that is its input. A transformer layer saves about 34*s*b*h bytes of
  // activations for backward (Korthikanti et al. 2022, 16-bit, without attention scores) and its input is
  // 2*s*b*h of them, about 0.06; 0.05 leaves a little for the rest of a stage.
  double input_mem = 0.05;

  double scale(int stage) const;
  // A stage's F, B, W (per-stage lists or the uniform values, times the stage's multiplier) and activation size.
  double forward_of(int stage) const;
  double backward_of(int stage) const;
  double weight_of(int stage) const;
  double input_of(int stage) const;  // I: `input` where given, else B - W
  double all_to_all_of(int stage) const;
  // FB of a pair of mean stages: the given one, or the pair timed phase by phase.
  double overlapped_pair() const;
  double activation_of(int stage) const;
  // The duration of one compute or data-parallel action; zero for communication actions.
  double duration(const Action& action) const;
  // The same on `rank`: its compute slowed by its speed (rank_speed).
  double duration_on(int rank, const Action& action) const;
  double speed_of(int rank) const;  // rank_speed's, or 1
  // The extra time a backward spends re-running its forward: F at that stage with recompute, else 0.
  double recompute_time(int stage) const;

  // Parses "F=1,B=2,W=1,FB=3,comm=0,a2a=1,a2a_latency=0.2,layers=2,pair=threads,unshard=0.5,reduce=1,
  // act_bytes=1e6,w_mem=0.5,recompute=1,input_mem=0.05" (any subset, any order; keys case-insensitive,
  // "scale=1:1:2" for per-stage multipliers, "F=2:1:1" (and B, W) for per-stage costs, "act_scale=1.5:1:1" for
  // per-stage activation sizes).
  // Strict: every item is KEY=VALUE, each key at most once, no empty items, finite numbers. Throws InvalidArgument
  // naming the bad item and the rule.
  static CostModel parse(std::string_view spec);
  // Checks the rules (all costs >= 0, W <= B, FB > 0 when set, shares in [0, 1], sums finite); throws
  // InvalidArgument naming the value.
  void check() const;
  // check(), and a per-stage list has exactly one value per stage of a schedule with num_stages stages.
  void check_stages(int num_stages) const;
  // rank_speed has no value or one per rank of a schedule with num_ranks ranks; throws InvalidArgument naming
  // --rank-speed.
  void check_ranks(int num_ranks) const;
  // The canonical "F=1,B=2,W=1,FB=3,comm=0" form (memory keys only where they differ from the defaults).
  std::string to_string() const;
};

// --rank-speed's "1,1,0.67,1": a positive speed per pipeline rank (CostModel::rank_speed). Throws InvalidArgument
// naming the option, the value and the rule.
std::vector<double> parse_rank_speed(std::string_view text);

// Comparisons hold the model fixed: per_slice holds the costs of one rank's 1/R slice of the model, and a schedule
// that cuts the model into S > R stages (DualPipeV, ZBV, interleaved) runs each stage at R/S of them (act_bytes
// too). A per-stage list with R values (one per slice: scale, F, B, W, act_scale) gives every stage cut from a
// slice that slice's value (costs times R/S); a list with S values is taken as it is; any other length is refused,
// naming both counts.
CostModel costs_per_stage(const CostModel& per_slice, int num_ranks, int num_stages);
// The inverse of costs_per_stage: the costs of a 1/R slice from the costs of S stages (costs times S/R, act_bytes
// too). A per-stage list must have S values or none; each slice gets the mean of its stages' values (times S/R for
// F, B and W).
CostModel costs_per_slice(const CostModel& per_stage, int num_ranks, int num_stages);

}  // namespace dualpipe

// Simulator costs from PyTorch profiler traces: the record_function regions a program marked, read as F, B, I, W,
// FB, one message's time and the expert all-to-all (`dualpipe profile --kineto`, `plan --from-kineto`,
// `Costs.from_kineto`; docs/profile.md, "Costs for the planner").
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dualpipe/sim/cost_model.h"
#include "dualpipe/trace/kineto.h"

namespace dualpipe {

// Which regions make each cost: ECMAScript regular expressions searched in region names, any case (anchor them,
// ^name$, for one exact name), at most kMaxCommunicationPatternLength characters; an empty one reads nothing. A
// name ending in " stage N" (as `dualpipe train --kineto-trace` writes them) is stage N's: the costs then come per
// stage. The defaults cover the common conventions: whole actions named forward,
// backward, backward_input and weight; DeepSeek's phases suffixed (F), (B), (I) and (W), such as attn(F),
// dispatch(F), mlp(B), mlp(W); and DualPipe's overlapped chunk pairs (1F1B, forward_backward).
struct KinetoCostNames {
  std::string forward = R"(^forward$|\(F\)$)";
  // The whole backward; where the trace also has weight regions and no input-gradient ones, its input-gradient
  // part (B = this + W), as a program that defers W records it.
  std::string backward = R"(^backward$|\(B\)$)";
  std::string backward_input = R"(^backward_input$|\(I\)$)";
  std::string weight = R"(^weight$|\(W\)$)";
  std::string overlapped = R"(^(forward_backward|1F1B|overlapped_forward_backward)$)";
  std::string comm = "^p2p$";  // one pipeline message
  // The work of a step outside its pipeline (gradient reduction, the optimizer), which a step's time adds to the
  // pipeline's; `dualpipe train --kineto-trace` names it update.
  std::string update = "^update$";

  // Throws InvalidArgument naming the option (--forward, ...) and its pattern when one is too long or not a
  // regular expression.
  void check() const;
};

// One cost and the events that made it.
struct KinetoCostSource {
  std::string cost;   // F, B, W, FB, comm, gap, a2a or update
  double value = 0;   // microseconds; the mean over stages for per-stage costs
  // How it was measured: "mean duration" (one region name: an action's occurrences), "compute per chunk" and
  // "communication per chunk" (several names: the phases of a chunk, their GPU work, or CPU operators' on a CPU
  // trace, summed over the phases and divided by the chunks), "I + W", "B + W", "B/2 (assumed)", or for update
  // "least median of a rank" (a rank that finished its pipeline early waits in the update for the others).
  std::string measure;
  std::vector<std::string> regions;  // the region names read, in order of first appearance
  int occurrences = 0;               // of those regions, over every rank's trace read
};

struct KinetoCosts {
  CostModel costs;                        // microseconds
  std::vector<KinetoCostSource> sources;  // one per cost read
  std::vector<std::string> warnings;      // what had to be assumed
  int stages = 0;                         // stages named by " stage N" suffixes; 0 when the regions name none
  double update = 0;                      // microseconds per step outside the pipeline; 0 without update regions
  std::vector<double> rank_updates;       // each trace's median update, in the order read (empty without any)
  // The traced steps (from 0) read where a run's costs come from the steps that make its median step, of
  // steps_traced; empty where every step was read.
  std::vector<int> steps_read;
  int steps_traced = 0;
};

// Several summaries are one job's ranks: their regions of one name are read together. Throws InvalidArgument
// naming the option, its pattern and the regions the trace has when no region makes F or B, or naming the pattern
// when it is not a valid regular expression.
// `as_measured`, where given, are the same traces as they ran, from which the gaps between actions are read
// (`ranks` then holding the actions' durations as each would have run alone: kineto_plan.h).
KinetoCosts costs_from_kineto(const std::vector<const KinetoSummary*>& ranks, const KinetoCostNames& names,
                              const std::vector<const KinetoSummary*>* as_measured = nullptr);
KinetoCosts costs_from_kineto(const KinetoSummary& summary, const KinetoCostNames& names);

// Whether a region of this name is work the costs read: a compute action (F, B, I, W, FB, or a phase of one) or
// the update; not a message. Throws as KinetoCostNames::check.
std::function<bool(const std::string&)> work_regions(const KinetoCostNames& names);
// The same without the update: the compute actions' regions (and their phases').
std::function<bool(const std::string&)> compute_regions(const KinetoCostNames& names);

// "F = 1234.500 us: mean duration (48 regions: forward stage 0, forward stage 1)".
std::string cost_source_text(const KinetoCostSource& source);

}  // namespace dualpipe

#include "dualpipe/sim/kineto_plan.h"

#include "dualpipe/schedule/text_format.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/sim/simulate.h"
#include "dualpipe/util/error.h"

namespace dualpipe {

namespace {

// The schedule the ranks' traces name, the same in every one that names it.
std::optional<Schedule> schedule_of(const KinetoRanks& ranks) {
  const KinetoRankSummary* named = nullptr;
  for (const KinetoRankSummary& r : ranks.ranks) {
    if (r.schedule.empty()) continue;
    if (!named) named = &r;
    DUALPIPE_REQUIRE(r.schedule == named->schedule, "profiler traces '", named->source, "' and '", r.source,
                     "' name different schedules (dualpipe.schedule): they are not one run");
  }
  if (!named) return std::nullopt;
  for (const KinetoRankSummary& r : ranks.ranks)
    DUALPIPE_REQUIRE(!r.schedule.empty(), "profiler trace '", named->source, "' names the schedule its run ran "
                     "(dualpipe.schedule) but '", r.source, "' names none: they are not one run");
  try {
    Schedule schedule = parse_text(named->schedule);
    validate(schedule);
    if (!named->schedule_kind.empty()) schedule.kind = named->schedule_kind;
    return schedule;
  } catch (const Error& e) {
    throw InvalidArgument(detail::concat("profiler trace '", named->source, "': its dualpipe.schedule is not a valid "
                                         "schedule: ", e.what()));
  }
}

}  // namespace

KinetoRun read_kineto_run(const KinetoRanks& ranks, const KinetoCostNames& names, int ranks_given) {
  std::vector<const KinetoSummary*> summaries;
  for (const KinetoRankSummary& r : ranks.ranks) summaries.push_back(&r.summary);
  KinetoRun run;
  run.costs = costs_from_kineto(summaries, names);
  run.slowest_rank = ranks.ranks[ranks.slowest].rank;
  run.measured_step = ranks.ranks[ranks.slowest].step;
  run.schedule = schedule_of(ranks);
  if (!run.schedule) {
    if (ranks_given > 0 && run.costs.stages > 0) {
      DUALPIPE_REQUIRE(run.costs.stages >= ranks_given, "the profiler traces' regions name ", run.costs.stages,
                       " stages, fewer than the ", ranks_given, " ranks to plan for: a slice of the model per rank "
                       "needs at least one stage");
      run.costs.costs = costs_per_slice(run.costs.costs, ranks_given, run.costs.stages);
    }
    return run;
  }
  const Schedule& s = *run.schedule;
  const int traces = static_cast<int>(ranks.ranks.size());
  DUALPIPE_REQUIRE(traces % s.num_ranks == 0, "the schedule the profiler traces ran (dualpipe.schedule) has ",
                   s.num_ranks, " ranks, but ", traces, " trace", traces == 1 ? " was" : "s were", " given: give "
                   "one trace per rank of the run (", s.num_ranks, ", or a multiple of it with data parallelism)");
  const int stages = run.costs.stages;
  DUALPIPE_REQUIRE(stages == 0 || stages == s.num_stages, "the profiler traces' regions name stages 0 to ",
                   stages - 1, " but the schedule they ran (dualpipe.schedule) has ", s.num_stages);
  const CostModel& per_stage = run.costs.costs;
  run.simulated_pipeline = simulate(s, per_stage).metrics.makespan;
  run.simulated_step = run.simulated_pipeline + run.costs.update;
  run.costs.costs = costs_per_slice(per_stage, s.num_ranks, s.num_stages);
  return run;
}

}  // namespace dualpipe

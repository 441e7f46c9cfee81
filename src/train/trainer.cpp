#include "dualpipe/train/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "dualpipe/comm/channels.h"
#include "dualpipe/parallel/data_parallel.h"
#include "dualpipe/parallel/gradient_norm.h"
#include "dualpipe/parallel/process_groups.h"
#include "dualpipe/parallel/replicated_step.h"
#include "dualpipe/parallel/state_bytes.h"
#include "dualpipe/runtime/clock_sync.h"
#include "dualpipe/runtime/concurrent_overlap.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/runtime/gather.h"
#include "dualpipe/runtime/trace_gather.h"
#include "dualpipe/schedule/data_parallel_lowering.h"
#include "dualpipe/sim/step_figures.h"
#include "dualpipe/trace/trace.h"
#include "dualpipe/util/directory_lock.h"
#include "checkpoint_io.h"
#include "correctness_checks.h"
#include "device_choice.h"
#include "expert_timeline.h"
#include "job_groups.h"
#include "kineto_profile.h"
#include "progress_report.h"
#include "sampling.h"
#include "stall_watch_setup.h"
#include "stage_traffic.h"
#include "step_stats.h"
#include "straggler_response.h"
#include "training_data.h"
#include "training_loop.h"

namespace dualpipe::train {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kStepStatsTag = comm::tag(comm::Channel::StepStats);
constexpr int kReplicaStatsTag = comm::tag(comm::Channel::ReplicaStats);
constexpr int kEvalTag = comm::tag(comm::Channel::Eval);
constexpr int kReplanTag = comm::tag(comm::Channel::Replan);  // whether the ranks stop for a re-plan
constexpr int kAllToAllTraceTag = comm::tag(comm::Channel::AllToAllTrace);

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Span (first start to last end) and busy time (sum of durations) of this rank's compute actions among
// records[from..], in microseconds: the figures of sim/step_figures.h, measured.
RankFigures span_and_busy(const runtime::Executor& executor, size_t from) {
  const auto& records = executor.recorded_actions();
  const auto& actions = executor.lowered_schedule().actions[executor.pipeline_rank()];
  std::vector<ComputeInterval> compute;
  const auto us = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - records[from].start).count();
  };
  for (size_t i = from; i < records.size(); ++i)
    if (actions[records[i].index].is_compute()) compute.push_back({us(records[i].start), us(records[i].end)});
  return busy_and_span(compute);
}

class Trainer {
 public:
  // `communicator`: this replica's pipeline; `dp`: the data-parallel replicas of it; `layers`: the groups every
  // stage's layers run their collectives on (job_groups.h).
  Trainer(const TrainConfig& c, RunPlan plan, const TrainHooks& hooks, std::shared_ptr<comm::Communicator> communicator,
          parallel::DataParallel dp, const LayerGroups& layers)
      : c_(c), hooks_(hooks), device_(stage_device(choose_device(c))), plan_(std::move(plan)),
        data_(load_training_data(c)),
        comm_(std::move(communicator)),
        dp_(std::move(dp)), timeline_(layers.timeline), tp_(layers.tp), cp_(layers.cp),
        timeout_(c.device.timeout()) {
    DUALPIPE_REQUIRE(comm_->size() == c.parallel.pp, "WORLD_SIZE is ", comm_->size(), " but --ranks is ", c.parallel.pp,
                     ": start one process per pipeline rank");
    rank_ = comm_->rank();
    const Schedule& s = plan_.schedule;
    std::map<int, std::shared_ptr<runtime::Stage>> stages;
    for (int m = 0; m < s.num_microbatches; ++m)
      for (int st = 0; st < s.num_stages; ++st)
        if (s.placement.rank(st, m) == rank_ && !stages_.count(st)) {
          stages_.emplace(st, StageState(c.optimizer, plan_.model, plan_.cut, st, layers, device_));
          std::shared_ptr<runtime::Stage> stage = runtime::make_list_stage(stages_.at(st).module);
          // Overlapping only pays where a half waits on its own communication: the expert all-to-alls.
          if (split_overlaps() && !halves_on_threads()) stage = models::make_phased_stage(stages_.at(st).module);
          if (halves_on_threads()) {
            auto timeline = timeline_;
            stage = std::make_shared<runtime::ConcurrentOverlapStage>(
                std::move(stage), [timeline](const runtime::OverlapHalves& h) { timeline->halves(h); },
                overlap_mode(c) == run::OverlapMode::Threads ? runtime::OverlapMode::Concurrent : runtime::OverlapMode::TakeTurns);
          }
          stages.emplace(st, std::move(stage));
        }
    view_ = parallel_view(stages_);
    runtime::ExecutorOptions options;
    options.timeout = timeout_;
    options.recompute = c.pipeline.recompute;
    options.pair_weights_last = halves_on_threads();  // the phases run W their own way
    options.record_trace = true;
    options.measure_memory = true;
    options.flight_recorder = std::make_shared<runtime::FlightRecorder>();  // both executors' (stall reports)
    // Training declares its fixed shapes (checked once, buffers posted ahead). Evaluation and sampling (whose
    // context grows) run on an executor of their own that declares none, so the trace's steps are training steps.
    runtime::ExecutorOptions forward_only = options;
    forward_only.record_trace = false;
    forward_only.measure_memory = false;
    const int64_t b = c.data.batch, T = c.model.seq_len / c.parallel.cp;  // context parallelism: this rank's tokens of a sequence
    options.boundaries.push_back({{{b, T}, torch::kLong, device_, false}});
    const int64_t tokens_between_stages = c.parallel.sp ? T / c.parallel.tp : T;  // sequence parallelism: this rank's tokens
    for (int st = 1; st < s.num_stages; ++st)
      options.boundaries.push_back({{{b, tokens_between_stages, c.model.hidden}, torch::kFloat, device_}});
    options.boundaries.push_back({{{b, T, plan_.model.vocab / c.parallel.tp}, torch::kFloat, device_}});  // its vocab slice
    // Training runs its data-parallel collectives as actions of its schedule, doing what train_step's args say.
    executor_ = std::make_unique<runtime::Executor>(
        add_data_parallel_actions(s, c.parallel.dp, c.parallel.zero, c.parallel.dp_overlap), stages, comm_,
        options);
    forward_only_ = std::make_unique<runtime::Executor>(s, stages, comm_, forward_only);
    replicas_ = parallel::ReplicatedStep(dp_, view_, c.parallel.zero);
    traffic_ = StageTraffic(c, plan_, rank_, tp_, cp_, stages_, dp_.traffic(), replicas_.joins_copies());
    clock_ = runtime::synchronize_clocks(*comm_, 8, timeout_);
    stall_watch_ = watch_for_stalls(c, options.flight_recorder, world());
    if (world().rank() == 0) {
      report_ = std::make_unique<ProgressReport>(c, plan_, data_.corpus, data_.reader.training_windows(),
                                                 data_.reader.validation_windows());
      stragglers_ = std::make_unique<StragglerResponse>(c, plan_.cut.layers_per_stage);
    }
  }

  void run() {
    int step = 0;
    if (!c_.checkpoint.dir.empty()) start_checkpoints();
    if (c_.checkpoint.resume) step = resume();
    replicas_.release_parameters();  // ZeRO-3: from here each replica keeps the tensors it owns
    first_trained_step_ = step + 1;
    kineto_ = KinetoProfile(c_, plan_.schedule, world().rank(), world().size(), step + 1);
    evaluate(step);
    for (++step; step <= c_.optimizer.steps; ++step) {
      train_step(step);
      if (hooks_.after_step) hooks_.after_step(rank_, step);
      const bool replan = step < c_.optimizer.steps && c_.stragglers.action == run::StragglerAction::Replan &&
                          agree_on_replan(world(), stragglers_.get(), kReplanTag, timeout_);
      if (c_.outputs.eval_every > 0 && step % c_.outputs.eval_every == 0 && step < c_.optimizer.steps && !replan) evaluate(step);
      const bool save = replan || step == c_.optimizer.steps || (c_.checkpoint.save_every > 0 && step % c_.checkpoint.save_every == 0);
      if (!c_.checkpoint.dir.empty() && save) {
        replicas_.gather_all();  // checkpoints hold the whole state, sharded or not
        const std::string dir =
            save_checkpoint(c_, plan_, step, data_.reader.position(), stages_, shard_role(), owner_, world(), timeout_);
        replicas_.shard_again();
        if (report_) report_->checkpoint_saved(dir);
      }
      if (replan) {  // the launcher starts the ranks again from this checkpoint, re-planned (include/dualpipe/train/job_launch.h)
        if (stragglers_) stragglers_->stop_for_replan(step, *report_);
        return;
      }
    }
    evaluate(c_.optimizer.steps);
    finish();
  }

 private:
  // World rank 0 saves the manifests and prunes: it holds the directory's lock for as long as it lives, so a
  // second job cannot save into the same directory, and draws this run's id (kept from the checkpoint when
  // resuming).
  void start_checkpoints() {
    prepare_checkpoint_dir(c_.checkpoint.dir);
    owner_.identity = checkpoint_identity(c_, plan_, data_.corpus);
    owner_.run = new_run_id();
    if (world().rank() != 0) return;
    lock_ = std::make_unique<DirectoryLock>(c_.checkpoint.dir, "--checkpoint-dir", "dualpipe train (world rank 0)");
    check_fresh_start(c_);
  }

  int resume() {
    std::vector<std::string> skipped;
    const auto resumed = load_newest_checkpoint(c_, owner_.identity, shard_role(), stages_, &skipped);
    if (!resumed) {
      if (report_) report_->no_checkpoint();
      return 0;
    }
    if (!resumed->manifest.run.empty()) owner_.run = resumed->manifest.run;
    replicas_.drop_unowned_state();
    data_.reader.restore(resumed->manifest.data_position);
    if (report_) report_->resumed(resumed->directory, resumed->manifest.step, resumed->manifest.planned_steps, skipped);
    return resumed->manifest.step;
  }

  runtime::StepArgs step_args(const std::vector<torch::Tensor>& inputs, const std::vector<torch::Tensor>& targets) {
    runtime::StepArgs args;
    for (int m : executor_->entering_microbatches())
      args.microbatch_inputs.push_back({parallel::context_slice(inputs[m], cp_).to(device_)});
    for (int m : executor_->loss_microbatches())
      args.microbatch_labels.push_back({parallel::context_slice(targets[m], cp_).to(device_)});
    const int M = c_.pipeline.microbatches, C = c_.parallel.cp;
    // With context parallelism each rank's loss is its tokens' share: the group's losses sum to the sequence's.
    args.criterion = [M, C, tp = tp_](const runtime::Tensors& logits, const runtime::Tensors& labels) {
      return models::next_token_loss(logits.at(0), labels.at(0), M, tp) / C;
    };
    args.num_microbatches = M;
    return args;
  }

  // The tensor and context ranks other than 0 hold the same tensors: (c, t) = (0, 0) writes them.
  ShardRole shard_role() const {
    return {rank_, dp_.replica(), c_.parallel.ep, (cp_ ? cp_->rank() : 0) * c_.parallel.tp + (tp_ ? tp_->rank() : 0)};
  }

  // `result` with each loss this rank computed summed over the context-parallel group: the whole sequence's.
  runtime::StepResult sum_over_context(runtime::StepResult result) const {
    if (!parallel::splits_context(cp_)) return result;
    for (int m : executor_->loss_microbatches())
      result.losses[m] = parallel::sum_over_context_parallel(result.losses[m], cp_);
    return result;
  }
  // Every rank of the job: the pipeline's own communicator when it is the whole job.
  comm::Communicator& world() const { return dp_.has_world() ? dp_.world() : *comm_; }

  // Whether overlapped pairs run split (as phases, or their halves on two threads: ConcurrentOverlapStage).
  bool split_overlaps() const { return c_.pipeline.fb_overlap && timeline_ != nullptr; }
  bool halves_on_threads() const { return split_overlaps() && overlap_mode(c_) != run::OverlapMode::Phases; }

  // The step's compute actions (from records[first..]) that the executor's thread ran whole: with halves on two
  // threads, the overlapped ones are the halves ExpertTimeline heard of instead.
  std::vector<ExpertTimeline::Span> main_thread_actions(size_t first) const {
    const auto& records = executor_->recorded_actions();
    const auto& actions = executor_->lowered_schedule().actions[executor_->pipeline_rank()];
    std::vector<ExpertTimeline::Span> spans;
    for (size_t i = first; i < records.size(); ++i) {
      const Action& a = actions[records[i].index];
      if (!a.is_compute() || (halves_on_threads() && a.type == ActionType::Overlapped)) continue;
      spans.push_back({std::this_thread::get_id(), records[i].start, records[i].end});
    }
    return spans;
  }

  // This replica's micro-batches of the step's global batch (replica d takes rows d*M*b to (d+1)*M*b - 1).
  std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> next_training_microbatches() {
    const int64_t rows = static_cast<int64_t>(c_.pipeline.microbatches) * c_.data.batch;
    auto [inputs, targets] = to_tensors(data_.reader.next(rows * dp_.replicas()));
    inputs = inputs.narrow(0, rows * dp_.replica(), rows);
    targets = targets.narrow(0, rows * dp_.replica(), rows);
    return split_microbatches(inputs, targets, c_.pipeline.microbatches);
  }

  void train_step(int step) {
    const auto profiled = kineto_.step(step);  // with --kineto-trace, from step 2
    emulate_slow_rank(c_, rank_, step);
    const auto [inputs, targets] = next_training_microbatches();
    const size_t first_record = executor_->recorded_actions().size();
    const auto start = Clock::now();
    for (auto& [s, state] : stages_) {
      state.optimizer->zero_grad();
      state.module->reset_moe_stats();
    }
    if (timeline_) timeline_->discard();
    runtime::StepArgs args = step_args(inputs, targets);
    replicas_.bind(args);  // what the schedule's data-parallel actions do
    traffic_.step_started();
    const runtime::StepResult result = sum_over_context(executor_->step(args));
    const auto updating = kineto_.region("update");  // the rest of the step, for plan --from-kineto
    const double dp_wait_ms = replicas_.finish_reductions();
    if (!replicas_.joins_copies()) executor_->reduce_replica_gradients();
    for (auto& [s, state] : stages_) {
      state.module->sum_sequence_parallel_gradients();
      state.module->sum_context_parallel_gradients();
    }
    traffic_.step_finished();
    double step_ms = ms_since(start);
    ReferenceCheck check;
    if (step == 1) {
      check = check_against_reference(plan_, inputs, targets, *executor_, result, stages_, dp_,
                                      replicas_.gradient_owners(), /*experts_sharded=*/c_.parallel.ep > 1, tp_,
                                      /*context_parallel=*/c_.parallel.cp > 1);
      if (!check.problems.empty())
        throw Error("step 1 differs from the single-process reference:\n" + problems_text(check.problems));
    }
    const auto update_start = Clock::now();
    const parallel::StateBytes gradients = parallel::held_state_bytes(view_);  // before ZeRO-1 drops some
    const double grad_norm = parallel::clip_to_global_norm(view_, plan_.schedule.placement, rank_, dp_,
                                                           replicas_.gradient_owners(), tp_, *comm_, timeout_, c_.optimizer.clip);
    const double lr = plan_.lr.at(step);
    replicas_.update([&] {
      for (auto& [s, state] : stages_) {
        state.set_lr(lr);
        state.optimizer->step();
      }
    });
    traffic_.updates_finished();
    step_ms += ms_since(update_start);

    RankStepStats mine;
    for (int m : executor_->loss_microbatches()) mine.loss_sum += result.losses[m].item<double>();
    mine.loss_sum = dp_.mean(mine.loss_sum);
    mine.step_ms = step_ms;
    mine.dp_wait_ms = dp_wait_ms;
    const RankFigures figures = span_and_busy(*executor_, first_record);
    mine.span_us = figures.span;
    mine.busy_us = figures.busy;
    mine.kind_ms_per_layer = kind_times(*executor_, first_record, plan_.cut.layers_per_stage);
    mine.losses_checked = check.losses_compared;
    mine.gradients_checked = check.gradients_compared;
    mine.worst_cosine = check.worst_cosine_distance;
    mine.peak_activation_bytes = static_cast<double>(executor_->last_step_stats().peak_activation_bytes);
    mine.peak_live_activations = executor_->last_step_stats().peak_live_activations;
    mine.held = parallel::held_state_bytes(view_);
    mine.held.gradients = gradients.gradients;
    mine.predicted = replicas_.predicted_bytes();
    if (plan_.model.moe.experts > 0) mine.moe = moe_stats_of_every_replica();
    if (timeline_) {
      const ExpertTimeline::StepTotals a2a =
          timeline_->finish_step(main_thread_actions(first_record), executor_->steps_run() - 1);
      mine.all_to_all_ms = a2a.all_to_all_ms;
      mine.all_to_all_exposed_ms = a2a.exposed_ms;
    }
    const auto gathered = runtime::gather_to_root(*comm_, pack_step_stats(mine), kStepStatsTag, timeout_);
    if (!report_) return;
    std::vector<RankStepStats> ranks;
    for (const torch::Tensor& t : gathered) ranks.push_back(unpack_step_stats(t));
    StepReport r = combine_step_stats(step, ranks);
    r.lr = lr;
    r.grad_norm = grad_norm;
    r.tokens_per_s = double(dp_.replicas()) * c_.pipeline.microbatches * c_.data.batch * c_.model.seq_len / (r.step_ms / 1000);
    report_->step(r);
    stragglers_->observe(step, ranks, *report_);
    if (step == 1) {
      const ReferenceCheckTotals checked = reference_check_totals(ranks);
      report_->reference_check(checked.losses, checked.gradients, checked.worst_cosine);
    }
  }

  // The MoE layers' routing statistics of this rank's stages, summed over the data-parallel replicas.
  models::MoeStats moe_stats_of_every_replica() {
    torch::Tensor moe = torch::zeros({4}, torch::kDouble);
    for (auto& [s, state] : stages_) {
      const models::MoeStats stats = state.module->moe_stats();
      moe[0] += double(stats.choices);
      moe[1] += double(stats.dropped);
      moe[2] += stats.aux_loss_sum;
      moe[3] += double(stats.aux_losses);
    }
    dp_.sum(moe);
    return {int64_t(moe[0].item<double>()), int64_t(moe[1].item<double>()), moe[2].item<double>(),
            int64_t(moe[3].item<double>())};
  }

  // Mean loss over one step's worth of validation sequences, through the forward-only mode.
  void evaluate(int step) {
    const auto [all_inputs, all_targets] =
        to_tensors(data_.reader.validation(static_cast<int64_t>(c_.pipeline.microbatches) * c_.data.batch));
    const auto [inputs, targets] = split_microbatches(all_inputs, all_targets, c_.pipeline.microbatches);
    torch::NoGradGuard no_grad;
    replicas_.gather_parameters();
    const runtime::StepResult result = sum_over_context(forward_only_->step(step_args(inputs, targets)));
    replicas_.release_parameters();
    double sum = 0;
    for (int m : forward_only_->loss_microbatches()) sum += result.losses[m].item<double>();
    const double total = runtime::sum_over_ranks(*comm_, torch::full({1}, sum, torch::kDouble), kEvalTag, timeout_)
                             .item<double>();
    if (report_) report_->evaluation(step, total);
  }

  void finish() {
    const std::string profiled = kineto_.save();  // before the sampling's forwards
    if (report_ && !profiled.empty()) std::printf("profiler traces: %s and its peers\n", profiled.c_str());
    replicas_.gather_parameters();  // to compare the replicas and sample
    const ReplicaCheck replicas = compare_replicas(plan_.schedule.placement, rank_, stages_, *comm_, timeout_);
    if (!replicas.problems.empty())
      throw Error("replicas differ after " + std::to_string(c_.optimizer.steps) + " steps:\n" + problems_text(replicas.problems));
    // Reaching this gather means this rank's replicas matched; rank 0 counts the comparisons.
    const auto counts = runtime::gather_to_root(
        *comm_, torch::full({1}, double(replicas.tensors_compared), torch::kDouble), kReplicaStatsTag, timeout_);
    int compared = 0;
    for (const auto& t : counts) compared += static_cast<int>(t.item<double>());
    const int dp_compared = dp_.check_replicas_identical(view_);
    const double dp_total =
        runtime::sum_over_ranks(*comm_, torch::full({1}, double(dp_compared), torch::kDouble), kReplicaStatsTag, timeout_)
            .item<double>();
    if (report_ && dp_.replicas() > 1)
      report_->data_parallel_replicas_identical(static_cast<int>(dp_total), dp_.replicas());
    if (report_ && !traffic_.describe().empty()) std::printf("%s\n", traffic_.describe().c_str());
    const std::string text = sample_text(c_, *forward_only_, *comm_, device_, timeout_, tp_, cp_);
    // Every replica ran the same schedule: replica 0's trace stands for them all.
    Trace trace = dp_.replica() == 0 ? runtime::gather_trace(*executor_, *comm_, clock_, timeout_) : Trace{};
    if (timeline_ && dp_.replica() == 0)
      trace.spans = gather_all_to_all_spans(*timeline_, *comm_, clock_, kAllToAllTraceTag, timeout_);
    // The executor counts its step() calls from 0; the trace numbers steps as this run prints them.
    for (TraceEvent& e : trace.events) e.step += first_trained_step_;
    for (TraceSpan& s : trace.spans) s.step += first_trained_step_;
    std::string trace_path;
    if (world().rank() == 0 && !c_.outputs.trace.empty()) {
      trace_path = std::filesystem::absolute(c_.outputs.trace).lexically_normal().string();
      write_trace_file(trace_path, trace);
    }
    // Each pair was compared twice, once from each side.
    if (report_) report_->summary(compared / 2, trace_path, trace.events.size(), clock_.round_trip_ns / 2000.0, text);
    comm_->barrier();  // rank 0 hosts the rendezvous store: leave together
    dp_.world_barrier();
  }

  const TrainConfig& c_;
  const TrainHooks hooks_;
  c10::Device device_;  // of every stage, their inputs and labels
  RunPlan plan_;
  TrainingData data_;
  std::shared_ptr<comm::Communicator> comm_;
  parallel::DataParallel dp_;
  parallel::ReplicatedStep replicas_;  // data parallelism and ZeRO over dp_
  std::shared_ptr<ExpertTimeline> timeline_;  // null without expert parallelism
  models::TensorGroup tp_;                     // null without tensor parallelism
  models::ContextGroup cp_;                    // null without context parallelism
  StageTraffic traffic_;
  std::chrono::milliseconds timeout_;
  int rank_ = 0;
  std::map<int, StageState> stages_;
  parallel::Stages view_;  // stages_ as data parallelism and ZeRO see them
  std::unique_ptr<runtime::Executor> executor_, forward_only_;
  std::unique_ptr<runtime::StallWatch> stall_watch_;
  runtime::ClockSync clock_;
  std::unique_ptr<ProgressReport> report_;
  std::unique_ptr<StragglerResponse> stragglers_;  // world rank 0's
  KinetoProfile kineto_;  // off unless --kineto-trace
  int first_trained_step_ = 1;  // the first step this run trains (after a resumed checkpoint's)
  CheckpointOwner owner_;                // set when there is a --checkpoint-dir
  std::unique_ptr<DirectoryLock> lock_;  // world rank 0's, of --checkpoint-dir
};

}  // namespace

void run_training_loop(const TrainConfig& config, RunPlan plan, const TrainHooks& hooks,
                       std::shared_ptr<comm::Communicator> pipeline, parallel::DataParallel dp, LayerGroups layers) {
  at::set_num_threads(1);
  Trainer(config, std::move(plan), hooks, std::move(pipeline), std::move(dp), layers).run();
}

}  // namespace dualpipe::train

// Issue 22: CUDA stages, checked on a GPU by scripts/gpu_check.sh (docs/gpu.md); skipped where LibTorch sees no GPU,
// as in CI.
// - Every schedule kind with its stages on one GPU, ranks as threads over the in-process transport: each rank
//   queues its work on a stream of its own, and the overlapped pairs of DualPipe and DualPipeV run their halves on
//   two (ConcurrentOverlapStage). Losses and gradients are bit-identical to the same step with every rank on the
//   GPU's default stream, one stream for all and no overlapping: the events between the streams leave nothing to
//   chance.
// - One overlapped pair on its own: the halves run on two streams, with the results of the forward followed by the
//   backward on one stream, bit for bit. How long the halves ran side by side is measured with CUDA events and
//   printed (not asserted: timings are no test's business).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "dualpipe/runtime/concurrent_overlap.h"
#include "runtime/support/kind_cases.h"
#include "runtime/support/reference_model.h"
#include "runtime/support/thread_ranks.h"

namespace dualpipe::testing {
namespace {

const c10::Device kGpu(c10::kCUDA, 0);

c10::Stream current_stream() { return c10::impl::VirtualGuardImpl(c10::kCUDA).getStream(kGpu); }
c10::Stream stream_from_pool() { return c10::impl::VirtualGuardImpl(c10::kCUDA).getStreamFromGlobalPool(kGpu); }

#define SKIP_WITHOUT_GPU() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU here (scripts/gpu_check.sh runs this on one)"

// What one step left, copied to the host: losses by micro-batch, gradients by stage.
struct StepOutcome {
  std::map<int, torch::Tensor> losses;
  std::map<int, std::vector<torch::Tensor>> grads;
};

// One training step of `c` with the stages on the GPU. `streams_of_their_own`: every rank on a pool stream, and
// every stage a ConcurrentOverlapStage (two streams in each overlapped pair); otherwise the default stream for all.
StepOutcome step_on_gpu(const KindCase& c, bool streams_of_their_own) {
  const Schedule schedule = make_case_schedule(c.kind, c.ranks);
  const ReferenceSetup setup = make_setup(schedule.num_stages, schedule.num_microbatches, 64, 16, 1234);
  StepOutcome outcome;
  std::mutex mutex;
  auto problems = run_ranks(c.ranks, [&](std::shared_ptr<comm::Communicator> comm) -> std::vector<std::string> {
    std::optional<c10::StreamGuard> own_stream;
    if (streams_of_their_own) own_stream.emplace(stream_from_pool());
    const int rank = comm->rank();
    std::map<int, std::shared_ptr<runtime::Stage>> stages;
    std::map<int, runtime::MlpStage> modules;
    for (int m = 0; m < schedule.num_microbatches; ++m)
      for (int s = 0; s < schedule.num_stages; ++s)
        if (schedule.placement.rank(s, m) == rank && !modules.count(s)) {
          runtime::MlpStage copy(setup.hidden);
          {
            torch::NoGradGuard no_grad;
            auto src = setup.model[s]->parameters(), dst = copy->parameters();
            for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
          }
          copy->to(kGpu);
          modules.emplace(s, copy);
          std::shared_ptr<runtime::Stage> stage = runtime::make_stage(copy);
          if (streams_of_their_own)
            stage = std::make_shared<runtime::ConcurrentOverlapStage>(stage, nullptr, runtime::OverlapMode::Concurrent);
          stages.emplace(s, stage);
        }
    runtime::ExecutorOptions options;
    options.boundaries = runtime::ExecutorOptions::uniform({{{setup.rows, setup.hidden}, torch::kFloat, kGpu}},
                                                           schedule.num_stages);
    runtime::Executor executor(schedule, stages, comm, options);
    auto on_gpu = [](const torch::Tensor& t) { return t.defined() ? t.to(kGpu) : t; };  // undefined: none here
    runtime::StepArgs args;
    args.inputs = {on_gpu(select_microbatches(setup.inputs, executor.entering_microbatches(), setup.num_microbatches))};
    args.labels = {on_gpu(select_microbatches(setup.labels, executor.loss_microbatches(), setup.num_microbatches))};
    args.criterion = runtime::single_tensor_criterion(mse);
    args.num_microbatches = setup.num_microbatches;
    runtime::StepResult result = executor.step(args);
    executor.reduce_replica_gradients();
    const std::lock_guard<std::mutex> lock(mutex);
    for (int m : executor.loss_microbatches()) outcome.losses[m] = result.losses[m].cpu();
    for (auto& [s, module] : modules)
      for (auto& p : module->parameters()) outcome.grads[s].push_back(p.grad().cpu());
    return {};
  });
  for (const auto& p : problems) ADD_FAILURE() << p;
  return outcome;
}

class CudaStages : public ::testing::TestWithParam<KindCase> {};

TEST_P(CudaStages, StreamPerRankIsBitIdenticalToOneStream) {
  SKIP_WITHOUT_GPU();
  at::set_num_threads(1);
  const StepOutcome one_stream = step_on_gpu(GetParam(), false);
  const StepOutcome own_streams = step_on_gpu(GetParam(), true);
  ASSERT_EQ(one_stream.losses.size(), static_cast<size_t>(2 * GetParam().ranks));
  ASSERT_EQ(own_streams.losses.size(), one_stream.losses.size());
  for (const auto& [m, loss] : one_stream.losses)
    EXPECT_TRUE(torch::equal(own_streams.losses.at(m), loss)) << "micro-batch " << m;
  ASSERT_EQ(own_streams.grads.size(), one_stream.grads.size());
  for (const auto& [s, grads] : one_stream.grads)
    for (size_t i = 0; i < grads.size(); ++i)
      EXPECT_TRUE(torch::equal(own_streams.grads.at(s)[i], grads[i])) << "stage " << s << " parameter " << i;
}

INSTANTIATE_TEST_SUITE_P(AllKinds, CudaStages, ::testing::ValuesIn(all_kind_cases()), case_name);

// Sixteen MLP blocks on [256, 512] rows: kernels small enough that one does not fill the GPU, so two streams can
// run side by side.
torch::nn::Sequential tower() {
  torch::manual_seed(7);
  torch::nn::Sequential blocks;
  for (int i = 0; i < 16; ++i) blocks->push_back(runtime::MlpStage(512));
  blocks->to(kGpu);
  return blocks;
}

// A CUDA event with timing, recorded on this thread's current stream.
c10::Event timing_event() {
  c10::Event event(c10::kCUDA, c10::EventFlag::BACKEND_DEFAULT);
  event.record(current_stream());
  return event;
}

// Times of events relative to an origin recorded on the caller's stream before the work.
class EventClock {
 public:
  EventClock() : origin_(timing_event()) {}
  c10::Event mark() const { return timing_event(); }
  double ms(const c10::Event& event) const {
    event.synchronize();
    return origin_.elapsedTime(event);
  }

 private:
  c10::Event origin_;
};

struct PairTimes {
  double forward_start, forward_end, backward_start, backward_end, total;
  double both_at_once() const {
    return std::max(0.0, std::min(forward_end, backward_end) - std::max(forward_start, backward_start));
  }
};

TEST(CudaOverlap, HalvesRunOnTwoStreamsWithTheResultsOfOneStream) {
  SKIP_WITHOUT_GPU();
  at::set_num_threads(1);
  torch::nn::Sequential blocks = tower();
  const torch::Tensor a = torch::randn({256, 512}, torch::TensorOptions().device(kGpu));
  const torch::Tensor b = torch::randn({256, 512}, torch::TensorOptions().device(kGpu));
  auto loss_of = [](const torch::Tensor& y) { return y.square().mean(); };
  auto grads = [&] {
    std::vector<torch::Tensor> g;
    for (auto& p : blocks->parameters()) g.push_back(p.grad().cpu());
    return g;
  };
  auto zero_grads = [&] {
    for (auto& p : blocks->parameters()) p.mutable_grad() = torch::Tensor();
  };

  // One stream: a's forward, then b's forward and a's backward one after the other, each timed.
  std::vector<double> sequential_forward, sequential_backward, sequential_total;
  torch::Tensor expected_output;
  std::vector<torch::Tensor> expected_grads;
  for (int repeat = 0; repeat < 6; ++repeat) {
    zero_grads();
    const torch::Tensor loss_a = loss_of(blocks->forward(a));
    EventClock clock;
    expected_output = blocks->forward(b);
    const c10::Event forward_done = clock.mark();
    loss_a.backward();
    const c10::Event backward_done = clock.mark();
    if (repeat == 0) continue;  // warm-up: the allocator's and cuBLAS's first calls
    sequential_forward.push_back(clock.ms(forward_done));
    sequential_backward.push_back(clock.ms(backward_done) - clock.ms(forward_done));
    sequential_total.push_back(clock.ms(backward_done));
  }
  expected_output = expected_output.detach().cpu();
  expected_grads = grads();

  // The same as an overlapped pair: b's forward and a's backward on two streams.
  std::optional<runtime::OverlapHalves> seen;
  std::optional<c10::Event> forward_start, forward_end, backward_start, backward_end;
  auto timed_forward = std::make_shared<runtime::ModuleStage>(blocks.ptr(), [&](const runtime::Tensors& x) {
    forward_start = timing_event();
    runtime::Tensors y{blocks->forward(x[0])};
    forward_end = timing_event();
    return y;
  });
  runtime::ConcurrentOverlapStage stage(
      timed_forward, [&](const runtime::OverlapHalves& h) { seen = h; }, runtime::OverlapMode::Concurrent);
  std::vector<PairTimes> pairs;
  torch::Tensor output;
  for (int repeat = 0; repeat < 6; ++repeat) {
    zero_grads();
    const torch::Tensor loss_a = loss_of(blocks->forward(a));
    runtime::BackwardHalf backward{[&] {
                                     backward_start = timing_event();
                                     loss_a.backward();
                                     backward_end = timing_event();
                                   },
                                   {},
                                   loss_a.grad_fn()->stream()};
    EventClock clock;
    output = stage.overlapped_forward_backward({b}, backward)[0];
    const c10::Event done = clock.mark();
    if (repeat == 0) continue;
    pairs.push_back({clock.ms(*forward_start), clock.ms(*forward_end), clock.ms(*backward_start),
                     clock.ms(*backward_end), clock.ms(done)});
  }
  ASSERT_TRUE(seen.has_value());
  ASSERT_TRUE(seen->forward_stream && seen->backward_stream);
  EXPECT_NE(*seen->forward_stream, *seen->backward_stream);
  EXPECT_EQ(*seen->backward_stream, current_stream()) << "a's forward ran here, so autograd runs its backward here";
  EXPECT_TRUE(torch::equal(output.detach().cpu(), expected_output));
  const auto overlapped_grads = grads();
  for (size_t i = 0; i < expected_grads.size(); ++i)
    EXPECT_TRUE(torch::equal(overlapped_grads[i], expected_grads[i])) << "parameter " << i;

  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> at_once, totals;
  for (const auto& p : pairs) {
    at_once.push_back(p.both_at_once());
    totals.push_back(p.total);
  }
  std::printf(
      "CUDA events, median of %zu: one stream: forward %.3f ms + backward %.3f ms = %.3f ms; overlapped pair on "
      "two streams: %.3f ms, of which the halves ran at once %.3f ms (one stream's time / the pair's = %.2f)\n",
      totals.size(), median(sequential_forward), median(sequential_backward), median(sequential_total),
      median(totals), median(at_once), median(sequential_total) / median(totals));
}

}  // namespace
}  // namespace dualpipe::testing

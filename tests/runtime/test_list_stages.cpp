// Issue 8, items 2-4: every schedule kind runs a transformer made of stock LibTorch layers, cut into stages that
// take and return [hidden, mask], against a single-process run of the same modules on the same micro-batches:
// losses and outputs bit-identical, gradients within cosine distance 1e-13. The Zero Bubble kinds split every
// backward with the generic input/weight split (no split-aware layer anywhere). Ranks are threads over a hub
// that ignores tags, like NCCL.
#include <gtest/gtest.h>
#include <torch/torch.h>


#include "dualpipe/runtime/executor.h"
#include "dualpipe/schedule/generators.h"
#include "runtime/support/kind_cases.h"
#include "runtime/support/reference_model.h"
#include "runtime/support/thread_ranks.h"
#include "runtime/support/transformer_stage.h"

namespace dualpipe::testing {
namespace {

using runtime::Tensors;

enum class Variant {
  DeclaredShapes,       // fixed shapes, declared: buffers posted ahead, outputs checked against the declaration
  VariableTokens,       // sequence length differs per micro-batch; shapes travel with the messages
  SmallerLastWholeBatch,  // whole batches split by the runtime, the last micro-batch smaller (-1 declared rows)
};

struct Data {
  std::vector<Tensors> inputs;   // per micro-batch: [ids, mask]
  std::vector<Tensors> labels;   // per micro-batch: [targets]
};

const TransformerShape kShape;
constexpr uint64_t kStageSeed = 500;

// Under SmallerLastWholeBatch, each entering rank's last micro-batch has 2 rows and the others 3, which is how
// torch.chunk cuts that rank's whole batch of 3k-1 rows into k parts.
Data make_data(Variant v, const Schedule& schedule) {
  const int M = schedule.num_microbatches;
  std::map<int, int> last_entering;  // rank -> its last entering micro-batch
  for (int m = 0; m < M; ++m) last_entering[schedule.placement.rank(0, m)] = m;
  Data d;
  for (int m = 0; m < M; ++m) {
    int64_t rows = 2, tokens = 4;
    if (v == Variant::VariableTokens) tokens = 2 + m % 4;
    if (v == Variant::SmallerLastWholeBatch) rows = last_entering[schedule.placement.rank(0, m)] == m ? 2 : 3;
    d.inputs.push_back(transformer_inputs(kShape, rows, tokens, 10 + m));
    d.labels.push_back({transformer_targets(kShape, rows, tokens, 100 + m)});
  }
  return d;
}

std::vector<runtime::BoundarySpec> boundaries(Variant v, int S) {
  if (v == Variant::VariableTokens) return {};
  const int64_t rows = v == Variant::SmallerLastWholeBatch ? -1 : 2, tokens = 4;
  const runtime::TensorSpec mask{{rows, 1, tokens, tokens}, torch::kFloat, c10::kCPU, false};
  std::vector<runtime::BoundarySpec> b;
  b.push_back({{{rows, tokens}, torch::kLong, c10::kCPU, false}, mask});
  for (int s = 1; s <= S; ++s) b.push_back({{{rows, tokens, kShape.width}, torch::kFloat}, mask});
  return b;
}

torch::Tensor criterion(const Tensors& outputs, const Tensors& labels) {
  return torch::mse_loss(outputs.at(0), labels.at(0));
}

struct Reference {
  std::vector<torch::Tensor> losses, outputs;
  std::vector<std::vector<torch::Tensor>> grads;  // per stage
};

Reference run_single_process(const Data& d, int S) {
  Reference ref;
  std::vector<TransformerStage> model;
  for (int s = 0; s < S; ++s) model.emplace_back(kShape, s == 0, kStageSeed + s);
  for (size_t m = 0; m < d.inputs.size(); ++m) {
    Tensors x = d.inputs[m];
    for (auto& stage : model) x = stage->forward(x);
    torch::Tensor loss = criterion(x, d.labels[m]);
    loss.backward();
    ref.losses.push_back(loss.detach());
    ref.outputs.push_back(x[0].detach());
  }
  for (auto& stage : model) {
    std::vector<torch::Tensor> g;
    for (auto& p : stage->parameters()) g.push_back(p.grad());
    ref.grads.push_back(g);
  }
  return ref;
}

Tensors concat_rows(const std::vector<Tensors>& parts) {
  Tensors whole;
  for (size_t t = 0; t < parts.front().size(); ++t) {
    std::vector<torch::Tensor> pieces;
    for (const auto& p : parts) pieces.push_back(p[t]);
    whole.push_back(torch::cat(pieces, 0));
  }
  return whole;
}

std::vector<std::string> run_rank(Variant v, const Data& d, const Reference& ref, const Schedule& schedule,
                                  std::shared_ptr<comm::Communicator> comm) {
  at::set_num_threads(1);
  const int rank = comm->rank(), S = schedule.num_stages;
  std::map<int, TransformerStage> modules;
  std::map<int, std::shared_ptr<runtime::Stage>> stages;
  for (int m = 0; m < schedule.num_microbatches; ++m)
    for (int s = 0; s < S; ++s)
      if (schedule.placement.rank(s, m) == rank && !modules.count(s)) {
        modules.emplace(s, TransformerStage(kShape, s == 0, kStageSeed + s));
        stages.emplace(s, runtime::make_list_stage(modules.at(s)));
      }
  runtime::ExecutorOptions options;
  options.boundaries = boundaries(v, S);
  runtime::Executor executor(schedule, stages, comm, options);
  runtime::StepArgs args;
  std::vector<Tensors> in, labels;
  for (int m : executor.entering_microbatches()) in.push_back(d.inputs[m]);
  for (int m : executor.loss_microbatches()) labels.push_back(d.labels[m]);
  // Labels stay per micro-batch: a loss rank's list can hold two smaller micro-batches (Chimera), which no
  // torch.chunk cut produces.
  if (v == Variant::SmallerLastWholeBatch && !in.empty()) {
    args.inputs = concat_rows(in);
  } else {
    args.microbatch_inputs = in;
  }
  args.microbatch_labels = labels;
  args.criterion = criterion;
  args.num_microbatches = schedule.num_microbatches;
  args.return_outputs = true;
  const runtime::StepResult result = executor.step(args);
  executor.reduce_replica_gradients();

  Problems problems(rank);
  for (int m : executor.loss_microbatches()) {
    if (!torch::equal(result.losses[m], ref.losses[m]))
      problems.add("loss of micro-batch ", m, " is ", result.losses[m].item<float>(), ", reference ",
                   ref.losses[m].item<float>());
    if (result.outputs[m].size() != 2 || !torch::equal(result.outputs[m][0], ref.outputs[m]))
      problems.add("hidden output of micro-batch ", m, " differs");
    else if (!torch::equal(result.outputs[m][1], d.inputs[m][1]))
      problems.add("the mask of micro-batch ", m, " did not pass through unchanged");
  }
  for (auto& [s, module] : modules) problems.check_gradients(s, module->parameters(), ref.grads[s]);
  return problems.list;
}

class ListStages : public ::testing::TestWithParam<KindCase> {
 protected:
  // `by_tag`: on a hub that matches by tag, where the mailbox posts receives ahead (headers, then tensors once
  // their headers arrived, as no micro-batch's shapes are learned); else by order alone, one message ahead.
  void check(Variant v, bool by_tag = false) {
    const Schedule schedule = make_case_schedule(GetParam().kind, GetParam().ranks);
    at::set_num_threads(1);
    const Data data = make_data(v, schedule);
    const Reference ref = run_single_process(data, schedule.num_stages);
    const auto problems = run_ranks(
        schedule.num_ranks,
        [&](std::shared_ptr<comm::Communicator> comm) { return run_rank(v, data, ref, schedule, comm); },
        std::chrono::seconds(60), /*single_tag=*/!by_tag);
    for (const auto& p : problems) ADD_FAILURE() << p;
  }
};

TEST_P(ListStages, HiddenAndMaskWithDeclaredShapes) { check(Variant::DeclaredShapes); }
TEST_P(ListStages, VariableSequenceLengths) { check(Variant::VariableTokens); }
TEST_P(ListStages, VariableSequenceLengthsWithReceivesAhead) { check(Variant::VariableTokens, /*by_tag=*/true); }
TEST_P(ListStages, SmallerLastMicrobatchFromWholeBatch) { check(Variant::SmallerLastWholeBatch); }

INSTANTIATE_TEST_SUITE_P(AllKinds, ListStages, ::testing::ValuesIn(all_kind_cases()), case_name);

}  // namespace
}  // namespace dualpipe::testing

// The reference check shared by the thread tests and the Gloo worker processes: the example MLP stages built
// once from a seed, a single-process run of the whole model micro-batch by micro-batch, and one pipeline
// rank's step compared against it.
#pragma once

#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "dualpipe/comm/communicator.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/runtime/mlp_stage.h"

namespace dualpipe::testing {

struct ReferenceSetup {
  int num_stages = 0, num_microbatches = 0;
  int64_t hidden = 8, rows = 2;                  // rows per micro-batch
  std::vector<runtime::MlpStage> model;          // stage s of the whole model
  torch::Tensor inputs, labels;                  // [M * rows, hidden]
};

struct ReferenceResult {
  std::vector<torch::Tensor> losses, outputs;     // per micro-batch
  std::vector<std::vector<torch::Tensor>> grads;  // per stage, per parameter
};

ReferenceSetup make_setup(int num_stages, int num_microbatches, int64_t hidden, int64_t rows, uint64_t seed);
// Runs the whole model micro-batch by micro-batch in this thread (forward, MSE loss, backward of each loss).
ReferenceResult run_reference(const ReferenceSetup& setup, bool training);
torch::Tensor mse(const torch::Tensor& output, const torch::Tensor& label);

// The rows of `batch` belonging to `microbatches`, concatenated in that order.
torch::Tensor select_microbatches(const torch::Tensor& batch, const std::vector<int>& microbatches, int total);
// 1 - 2 x.y / (x.x + y.y) in double.
double cosine_distance(const torch::Tensor& x, const torch::Tensor& y);

// The mismatches one rank found, each "rank r: ...".
class Problems {
 public:
  explicit Problems(int rank) : rank_(rank) {}
  template <typename... Parts>
  void add(const Parts&... parts) {
    std::ostringstream out;
    out << "rank " << rank_ << ": ";
    (out << ... << parts);
    list.push_back(out.str());
  }
  // Every parameter of `stage` has a gradient within cosine distance 1e-13 of the reference's.
  void check_gradients(int stage, const std::vector<torch::Tensor>& parameters,
                       const std::vector<torch::Tensor>& reference);
  std::vector<std::string> list;

 private:
  int rank_;
};

struct RankOptions {
  // Pipeline rank -> communicator rank (sub-group); empty: identity.
  std::vector<int> rank_mapping;
  // Wraps each stage module (to test stage hooks); empty: runtime::make_stage.
  std::function<std::shared_ptr<runtime::Stage>(runtime::MlpStage)> wrap;
  // ExecutorOptions::pair_weights_last.
  bool pair_weights_last = false;
  // Called with the step's arguments and this rank's modules (by stage) before the step: to set hooks.
  std::function<void(runtime::StepArgs&, const std::map<int, runtime::MlpStage>&)> before_step;
};

// Runs one step of `schedule` on the pipeline rank of `communicator.rank()` with copies of the reference stages,
// reduces replica gradients (training), and returns every mismatch with the reference (empty: all equal).
std::vector<std::string> run_and_check_rank(const ReferenceSetup& setup, const ReferenceResult& reference,
                                            const Schedule& schedule,
                                            std::shared_ptr<comm::Communicator> communicator, bool training,
                                            bool declare_shapes = true, const RankOptions& rank_options = {});

}  // namespace dualpipe::testing

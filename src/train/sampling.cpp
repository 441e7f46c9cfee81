#include "sampling.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "dualpipe/comm/channels.h"
#include "dualpipe/data/byte_tokenizer.h"
#include "dualpipe/runtime/gather.h"

namespace dualpipe::train {
namespace {

constexpr int kSampleTag = comm::tag(comm::Channel::Sample);
constexpr uint64_t kSampleStream = 0x5A3D1E;  // the sample's random stream, apart from the data's

}  // namespace

std::string sample_text(const TrainConfig& c, runtime::Executor& forward_only, comm::Communicator& communicator,
                        c10::Device device, std::chrono::milliseconds timeout, const models::TensorGroup& tp) {
  if (c.sample_tokens == 0) return "";
  data::ByteTokenizer tokenizer;
  std::vector<int64_t> text = tokenizer.encode(c.prompt);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(c.seed ^ kSampleStream);
  torch::NoGradGuard no_grad;
  const auto& exits = forward_only.loss_microbatches();
  const bool draws = std::find(exits.begin(), exits.end(), 0) != exits.end();
  for (int i = 0; i < c.sample_tokens; ++i) {
    const size_t n = std::min<size_t>(text.size(), static_cast<size_t>(c.seq_len));
    std::vector<int64_t> window(text.end() - n, text.end());
    // Sequence parallelism splits the tokens evenly: pad after the context, which causal attention never sees.
    if (parallel::splits_sequence(tp)) window.resize((n + tp->size() - 1) / tp->size() * tp->size(), 0);
    const torch::Tensor context = torch::tensor(window, torch::kLong).reshape({1, -1}).to(device);
    runtime::StepArgs args;
    for (size_t k = 0; k < forward_only.entering_microbatches().size(); ++k)
      args.microbatch_inputs.push_back({context});
    args.num_microbatches = c.microbatches;
    args.return_outputs = true;
    const runtime::StepResult result = forward_only.step(args);
    double next = 0;
    if (draws) {
      const torch::Tensor logits =
          parallel::gather_last_dim(result.outputs[0][0][0][int64_t(n) - 1], tp).to(torch::kCPU, torch::kDouble);
      next = c.temperature == 0 ? logits.argmax().item<double>()
                                : torch::softmax(logits / c.temperature, -1).multinomial(1, false, gen).item<double>();
    }
    next = runtime::sum_over_ranks(communicator, torch::full({1}, next, torch::kDouble), kSampleTag, timeout)
               .item<double>();
    text.push_back(static_cast<int64_t>(next));
  }
  return tokenizer.decode(text);
}

}  // namespace dualpipe::train

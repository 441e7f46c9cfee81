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
                        c10::Device device, std::chrono::milliseconds timeout, const models::TensorGroup& tp,
                        const models::ContextGroup& cp) {
  if (c.outputs.sample_tokens == 0) return "";
  data::ByteTokenizer tokenizer;
  std::vector<int64_t> text = tokenizer.encode(c.outputs.prompt);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(c.data.seed ^ kSampleStream);
  torch::NoGradGuard no_grad;
  const auto& exits = forward_only.loss_microbatches();
  const bool draws = std::find(exits.begin(), exits.end(), 0) != exits.end();
  for (int i = 0; i < c.outputs.sample_tokens; ++i) {
    const size_t n = std::min<size_t>(text.size(), static_cast<size_t>(c.model.seq_len));
    std::vector<int64_t> window(text.end() - n, text.end());
    // Sequence parallelism splits the tokens evenly: pad after the context, which causal attention never sees.
    // Context parallelism cuts it into 2C chunks: the same.
    int64_t multiple = parallel::splits_sequence(tp) ? tp->size() : 1;
    if (parallel::splits_context(cp)) multiple *= 2 * cp->size();
    window.resize((n + multiple - 1) / multiple * multiple, 0);
    const torch::Tensor whole = torch::tensor(window, torch::kLong).reshape({1, -1});
    const torch::Tensor context = parallel::context_slice(whole, cp).to(device);
    // Where the last token's logits come out: its index among this rank's tokens (-1: another context rank's).
    int64_t last = int64_t(n) - 1;
    if (parallel::splits_context(cp)) {
      const torch::Tensor mine = parallel::context_positions(whole.size(1), cp->rank(), cp->size());
      const torch::Tensor at = (mine == last).nonzero();
      last = at.numel() > 0 ? at.item<int64_t>() : -1;
    }
    runtime::StepArgs args;
    for (size_t k = 0; k < forward_only.entering_microbatches().size(); ++k)
      args.microbatch_inputs.push_back({context});
    args.num_microbatches = c.pipeline.microbatches;
    args.return_outputs = true;
    const runtime::StepResult result = forward_only.step(args);
    double next = 0;
    if (draws) {
      const torch::Tensor out = result.outputs[0][0][0];  // [this rank's tokens, its slice of the vocabulary]
      torch::Tensor logits =
          last >= 0 ? parallel::gather_last_dim(out[last], tp).to(torch::kCPU, torch::kDouble)
                    : torch::zeros({out.size(-1) * (tp ? tp->size() : 1)}, torch::kDouble);
      // Every context rank draws from the same logits with the same generator: the same byte, the same stream.
      logits = parallel::sum_over_context_parallel(logits, cp);
      next = c.outputs.temperature == 0 ? logits.argmax().item<double>()
                                : torch::softmax(logits / c.outputs.temperature, -1).multinomial(1, false, gen).item<double>();
    }
    next = runtime::sum_over_ranks(communicator, torch::full({1}, next, torch::kDouble), kSampleTag, timeout)
               .item<double>();
    text.push_back(static_cast<int64_t>(next));
  }
  return tokenizer.decode(text);
}

}  // namespace dualpipe::train

// The emulated device's two parts (internal; see EmulatedLayer in dualpipe/models/moe.h).
//
// Compute: a step of the graph that takes set times in the forward and in each half of the backward by sleeping,
// holding the rank's one emulated device, so the host stays nearly idle while it "computes", as with a GPU. The
// host's own maths on a thread since its last compute stand for part of its next. Two halves of an overlapped
// pair never compute at once, whichever overlap mode runs them: a GPU's streams share one device; nor does one's
// host work count while the other's compute holds the device. Its backward behaves like LibTorch's layers: it
// takes the input-gradient time only when autograd asks for the input's gradient and the weight-gradient time only
// when it asks for the anchor parameter's, so the executor's I/W split puts each time in its own action. It
// returns its input unchanged and a zero gradient for the anchor, so the maths are those of the layer without it,
// bit for bit.
//
// Exchanges: each rank's chunk of an all-to-all padded with zero rows up to a size, the padding dropped on arrival
// (and its gradient, zeros, in the backward).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "dualpipe/parallel/expert_all_to_all.h"

namespace dualpipe::models {

torch::Tensor emulated_compute(const torch::Tensor& x, const torch::Tensor& anchor, int64_t forward_us,
                               int64_t input_grad_us, int64_t weight_grad_us);

// An all-to-all started (parallel::start_expert_all_to_all) with each rank's chunk of `x` padded to at least
// `bytes_off_rank / (size - 1)` bytes, so that one exchange sends that many bytes off the rank (0: no padding).
// `sent` is what went out and `exchange.output` what comes in, padded both; result() waits and drops the padding.
struct PaddedExchange {
  parallel::ExchangeInFlight exchange;
  torch::Tensor sent;
  int size = 1;
  int64_t rows = -1;  // each rank's rows before the padding; -1: none added

  torch::Tensor result();
};
PaddedExchange start_padded_all_to_all(const torch::Tensor& x, const parallel::ExpertCommunication& group,
                                       const std::string& what, int64_t bytes_off_rank);

}  // namespace dualpipe::models

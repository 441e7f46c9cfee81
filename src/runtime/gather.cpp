#include "dualpipe/runtime/gather.h"

#include <torch/torch.h>

namespace dualpipe::runtime {

std::vector<torch::Tensor> gather_to_root(comm::Communicator& communicator, const torch::Tensor& local, int tag,
                                          std::chrono::milliseconds timeout, int root) {
  DUALPIPE_REQUIRE(local.defined() && local.dim() == 1, "gather_to_root takes a 1-D tensor, got ",
                   local.defined() ? local.dim() : -1, " dimensions");
  DUALPIPE_REQUIRE(root >= 0 && root < communicator.size(), "gather root ", root, " is not a rank of the ",
                   communicator.size(), "-rank communicator");
  if (timeout.count() <= 0) timeout = communicator.timeout();
  const torch::Tensor data = local.contiguous();
  if (communicator.rank() != root) {
    torch::Tensor length = torch::full({1}, data.numel(), torch::kLong);
    auto sent_length = communicator.isend(length, root, tag);
    std::shared_ptr<comm::Work> sent_data;
    // Empty tensors are not sent: some transports reject zero-byte messages.
    if (data.numel() > 0) sent_data = communicator.isend(data, root, tag);
    sent_length->wait(timeout);
    if (sent_data) sent_data->wait(timeout);
    return {};
  }
  std::vector<torch::Tensor> gathered(static_cast<size_t>(communicator.size()));
  for (int r = 0; r < communicator.size(); ++r) {
    if (r == root) {
      gathered[r] = data;
      continue;
    }
    torch::Tensor length = torch::empty({1}, torch::kLong);
    communicator.irecv(length, r, tag)->wait(timeout);
    gathered[r] = torch::empty({length.item<int64_t>()}, data.options());
    if (gathered[r].numel() > 0) communicator.irecv(gathered[r], r, tag)->wait(timeout);
  }
  return gathered;
}

torch::Tensor sum_over_ranks(comm::Communicator& communicator, const torch::Tensor& local, int tag,
                             std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) timeout = communicator.timeout();
  const auto parts = gather_to_root(communicator, local, tag, timeout);
  torch::Tensor total = local.contiguous().clone();
  if (communicator.rank() == 0) {
    total = parts[0].clone();
    for (size_t r = 1; r < parts.size(); ++r) {
      DUALPIPE_REQUIRE(parts[r].numel() == total.numel(), "sum_over_ranks: rank ", r, " contributed ",
                       parts[r].numel(), " values, rank 0 ", total.numel());
      total += parts[r];
    }
    std::vector<std::shared_ptr<comm::Work>> sends;
    for (int r = 1; r < communicator.size(); ++r) sends.push_back(communicator.isend(total, r, tag));
    for (auto& s : sends) s->wait(timeout);
  } else {
    communicator.irecv(total, 0, tag)->wait(timeout);
  }
  return total;
}

}  // namespace dualpipe::runtime

#include "dualpipe/runtime/replicas.h"

#include <torch/torch.h>

#include "dualpipe/comm/channels.h"

namespace dualpipe::runtime {

void reduce_replica_gradients(const Placement& placement, int pipeline_rank,
                              const std::map<int, std::shared_ptr<Stage>>& stages, comm::Communicator& communicator,
                              const std::vector<int>& rank_mapping, std::chrono::milliseconds timeout) {
  if (placement.num_replicas() < 2) return;
  if (timeout.count() <= 0) timeout = communicator.timeout();
  auto comm_rank = [&](int r) { return rank_mapping.empty() ? r : rank_mapping.at(static_cast<size_t>(r)); };

  struct Exchange {
    torch::Tensor grad, mine, theirs;
    std::shared_ptr<comm::Work> send, recv;
    int stage = 0, other = 0;
  };
  std::vector<Exchange> exchanges;
  for (const auto& [stage, module] : stages) {
    int r0 = placement.rank_of(0, stage), r1 = placement.rank_of(1, stage);
    DUALPIPE_REQUIRE(pipeline_rank == r0 || pipeline_rank == r1, "rank ", pipeline_rank, " holds stage ", stage,
                     " but the placement puts its replicas on ranks ", r0, " and ", r1);
    int other = pipeline_rank == r0 ? r1 : r0;
    if (other == pipeline_rank) continue;
    auto params = module->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      auto& p = params[i];
      if (!p.requires_grad()) continue;
      if (!p.mutable_grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      Exchange e;
      e.grad = p.mutable_grad();
      e.mine = e.grad.detach().contiguous();
      e.theirs = torch::empty_like(e.mine);
      // Both replicas walk their stages and parameters in the same order: one channel, FIFO.
      const int tag = comm::tag(comm::Channel::Replica);
      e.stage = stage;
      e.other = comm_rank(other);
      e.send = communicator.isend(e.mine, e.other, tag);
      e.recv = communicator.irecv(e.theirs, e.other, tag);
      exchanges.push_back(std::move(e));
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& e : exchanges) {
    try {
      e.recv->wait(timeout);
      e.send->wait(timeout);
    } catch (const comm::CommError& error) {
      // dualpipe::detail, not the runtime's own detail namespace (src/runtime/*.h), which a unity build may
      // have declared before this file.
      throw comm::CommError(dualpipe::detail::concat("rank ", communicator.rank(), ": exchanging stage ", e.stage,
                                                     "'s gradients with rank ", e.other, ": ", error.reason()),
                            error.rank(), error.reason(), error.invalid_input());
    }
    // IEEE addition is commutative, so both replicas compute the same bits.
    e.grad.copy_(e.mine + e.theirs);
  }
}

}  // namespace dualpipe::runtime

// Small control-plane messages outside a pipeline step: gathering per-rank statistics or trace events on one
// rank. Point-to-point over the Communicator (it has no collectives), lengths first, so ranks may contribute
// tensors of different lengths.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <vector>

#include "dualpipe/comm/channels.h"
#include "dualpipe/comm/communicator.h"

namespace dualpipe::runtime {

// Every rank of `communicator` calls this with its 1-D `local` tensor (same dtype on every rank). On `root` it
// returns the tensors of all ranks, indexed by communicator rank (its own included); elsewhere an empty vector.
// The length and then the data travel with `tag` (channels.h: comm::tag(Channel::Gather), or a program's own
// application_tag), in that order. Throws CommError naming the rank that did not answer within `timeout` (0: the
// communicator's).
std::vector<torch::Tensor> gather_to_root(comm::Communicator& communicator, const torch::Tensor& local, int tag,
                                          std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
                                          int root = 0);

// The element-wise sum of every rank's 1-D `local` (same length and dtype everywhere), on every rank: gathered
// on rank 0, added in rank order (so every run adds in the same order), and sent back.
torch::Tensor sum_over_ranks(comm::Communicator& communicator, const torch::Tensor& local, int tag,
                             std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

}  // namespace dualpipe::runtime

// Where this machine's ranks of a `dualpipe train` job stand, as torchrun's multi-node flags (docs/launch.md): filled
// by the command line (tools/dualpipe/train_options.h), read by the job's launcher (train/job_launch.h).
#pragma once

#include <string>

namespace dualpipe::run {

struct TrainLaunch {
  int nnodes = 1, node_rank = 0;
  int nproc_per_node = 0;  // 0: the world split evenly over the nodes
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port (one node), 29500 (several)
  int max_restarts = 0;
};

}  // namespace dualpipe::run

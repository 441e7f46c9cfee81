#include "device_choice.h"

#include <torch/cuda.h>

#include <cstdlib>

#include "dualpipe/run/train_values.h"
#include "dualpipe/util/error.h"

namespace dualpipe::train {

DeviceChoice choose_device(const TrainConfig& c) {
  DeviceChoice choice;
  choice.cuda = c.device.kind == run::DeviceKind::Cuda;
  const bool nccl = c.device.backend == run::Backend::Nccl || (c.device.backend == run::Backend::Auto && choice.cuda);
  choice.backend = nccl ? comm::BackendKind::nccl : comm::BackendKind::gloo;
  DUALPIPE_REQUIRE(!(choice.backend == comm::BackendKind::nccl && !choice.cuda),
                   "--backend nccl needs --device cuda: NCCL carries only CUDA tensors, and --device ",
                   run::word_of(c.device.kind), " keeps the stages on the CPU (use --backend gloo)");
  DUALPIPE_REQUIRE(!(choice.backend == comm::BackendKind::nccl && !comm::nccl_compiled_in()),
                   "--backend nccl: this LibTorch was built without NCCL (use --backend gloo)");
  if (choice.cuda) {
    const int gpus = static_cast<int>(torch::cuda::device_count());  // a DeviceIndex would print as a character
    DUALPIPE_REQUIRE(gpus > 0, "--device cuda needs a CUDA GPU, and this machine has none (LibTorch sees ", gpus,
                     " CUDA devices): use --device cpu");
    // NCCL refuses two ranks of a group on one GPU ("Duplicate GPU detected"), and would say so only once every
    // rank has started. The launcher tells each rank, and the check before them, how many ranks this machine runs.
    if (choice.backend == comm::BackendKind::nccl) {
      const char* local = std::getenv("LOCAL_WORLD_SIZE");
      const long local_ranks = local ? std::strtol(local, nullptr, 10) : 1;
      DUALPIPE_REQUIRE(local_ranks <= gpus, "--backend nccl (the default for --device cuda) needs a GPU for every "
                       "rank: this machine runs ", local_ranks, " ranks and has ", gpus,
                       " GPUs, and NCCL refuses two ranks on one GPU (use --backend gloo to share GPUs)");
    }
  }
  return choice;
}

c10::Device stage_device(const DeviceChoice& choice) {
  if (!choice.cuda) return c10::kCPU;
  const char* local_rank = std::getenv("LOCAL_RANK");
  const long rank = local_rank ? std::strtol(local_rank, nullptr, 10) : 0;
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(rank % torch::cuda::device_count()));
}

}  // namespace dualpipe::train

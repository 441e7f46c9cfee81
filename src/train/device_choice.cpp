#include "device_choice.h"

#include <torch/cuda.h>

#include "dualpipe/error.h"

namespace dualpipe::train {

DeviceChoice choose_device(const TrainConfig& c) {
  DUALPIPE_REQUIRE(c.device == "cpu" || c.device == "cuda", "--device '", c.device, "' is not one of cpu, cuda");
  DeviceChoice choice;
  choice.cuda = c.device == "cuda";
  if (c.backend.empty()) {
    choice.backend = choice.cuda ? comm::BackendKind::nccl : comm::BackendKind::gloo;
  } else {
    choice.backend = comm::parse_backend(c.backend);
  }
  DUALPIPE_REQUIRE(!(choice.backend == comm::BackendKind::nccl && !choice.cuda),
                   "--backend nccl needs --device cuda: NCCL carries only CUDA tensors, and --device ", c.device,
                   " keeps the stages on the CPU (use --backend gloo)");
  DUALPIPE_REQUIRE(!(choice.backend == comm::BackendKind::nccl && !comm::nccl_compiled_in()),
                   "--backend nccl: this LibTorch was built without NCCL (use --backend gloo)");
  if (choice.cuda) {
    const auto gpus = torch::cuda::device_count();
    DUALPIPE_REQUIRE(gpus > 0, "--device cuda needs a CUDA GPU, and this machine has none (LibTorch sees ", gpus,
                     " CUDA devices): use --device cpu");
    // Refused rather than run on the CPU under a CUDA name: the stages, buffers and optimizer state are not yet
    // moved to the GPU, nor do the stages have streams (issue 22, docs/gpu.md).
    DUALPIPE_REQUIRE(false, "--device cuda: training on CUDA stages is not built yet (docs/gpu.md says what "
                            "runs on a GPU today); use --device cpu");
  }
  return choice;
}

}  // namespace dualpipe::train

#include "dualpipe/comm/backend.h"

#include <cstdlib>
#include <mutex>

// The wheel has no Gloo headers; Debian's libgloo-dev provides them (scripts/setup.sh). Only pointers to Gloo's
// types cross into this file, and every Gloo object is made inside LibTorch, so the older headers' class
// layouts are never used here.
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "dualpipe/util/error.h"

namespace dualpipe::comm {

bool nccl_compiled_in() {
#ifdef USE_C10D_NCCL
  return true;
#else
  return false;
#endif
}

namespace {

// LibTorch 2.11's flight recorder, which Gloo groups now feed, is one object per process whose map of groups is
// updated without a lock: groups used from several threads at once (ranks as threads, or the gradient reduction
// beside the pipeline) crashed in it (a SIGSEGV in FlightRecorder::recordWithResetEnabled, once in 31 to 40 runs of
// MeshGroups). It reads TORCH_FR_BUFFER_SIZE once, when first used: 0 turns it off. Set once, before the first
// group, unless the user set it.
void turn_off_flight_recorder() {
  static std::once_flag once;
  std::call_once(once, [] { ::setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/0); });
}

}  // namespace

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                         int size, const ProcessGroupSpec& spec) {
  DUALPIPE_REQUIRE(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " is outside a group of ", size);
  turn_off_flight_recorder();
  DUALPIPE_REQUIRE(spec.backend == BackendKind::gloo || nccl_compiled_in(),
                   "backend 'nccl' needs a LibTorch built with NCCL; this one has none (use --backend gloo)");
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, size);
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(spec.timeout);
  gloo_options->devices.push_back(spec.interface.empty()
                                      ? c10d::ProcessGroupGloo::createDefaultDevice()
                                      : c10d::ProcessGroupGloo::createDeviceForInterface(spec.interface));
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, gloo_options);
  group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
  if (spec.backend == BackendKind::gloo) {
    // Gloo moves CUDA tensors too, through host memory.
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, gloo);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
    return group;
  }
#ifdef USE_C10D_NCCL
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = spec.timeout;
  const c10::Device device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(spec.cuda_device));
  // Bound to this rank's device, NCCL makes its communicator eagerly there (setBackend hands it on).
  if (spec.bind_device) group->setBoundDeviceId(device);
  // Under its own key prefix, apart from the Gloo backend's keys.
  auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>("cuda/", store),
                                                          rank, size, options);
  group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
#endif
  return group;
}

}  // namespace dualpipe::comm

// c10d process groups over Gloo or NCCL, made as torch.distributed makes them in PyTorch 2: a c10d::ProcessGroup
// holding one backend (c10d::Backend) for the device type of the tensors it carries. Every group the project
// makes goes through make_process_group, the one file that includes the backends' headers.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <string>

namespace dualpipe::comm {

enum class BackendKind { gloo, nccl };

// Whether this LibTorch was built with NCCL (the PyPI wheels for CUDA are).
bool nccl_compiled_in();

struct ProcessGroupSpec {
  BackendKind backend = BackendKind::gloo;
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
  // Gloo: the network interface to bind (empty: the address of this host's name).
  std::string interface;
  // NCCL: the CUDA device of this rank (one GPU per rank; NCCL refuses two ranks on one device).
  int cuda_device = 0;
  // NCCL: make the communicator now, on cuda_device, for the whole group (collectives). False: NCCL makes one
  // communicator per pair of ranks at their first send or receive, each with its own stream, so that the two
  // directions of pipeline_channels (directional_communicator.h) never wait on each other. PyTorch runs every
  // point-to-point operation of an eagerly made group on the group's one communicator, in issue order.
  bool bind_device = true;
};

// The group of `size` ranks that rendezvous through `store`, as `rank`. An NCCL group carries CUDA tensors over
// NCCL and CPU tensors (the runtime's small control messages) over Gloo, as torch.distributed's "cpu:gloo,cuda:nccl".
// Throws dualpipe::Error when the backend is not in this LibTorch.
c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                         int size, const ProcessGroupSpec& spec);

}  // namespace dualpipe::comm

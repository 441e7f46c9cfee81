// A cluster as the layout planner sees it: how many GPUs, how they are grouped in nodes, their memory, speed and
// links. Read from a JSON file or named by a preset with a GPU count ("h800x2048").
#pragma once

#include <string>
#include <vector>

namespace dualpipe::layout {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;  // memory_gib's unit
constexpr int kMaxClusterGpus = 1 << 20;

// The two efficiencies fitted on Narayanan et al. 2021's Table 1 (the test in tests/layout/test_published_runs.cpp
// fits them again from the published figures and checks these are its result).
constexpr double kFittedMatmulEfficiency = 0.72;
constexpr double kFittedMemoryEfficiency = 0.80;

struct ClusterSpec {
  std::string name;
  int gpus = 0;
  int gpus_per_node = 8;
  double memory_gib = 0;
  double peak_tflops = 0;        // dense 16-bit, per GPU
  double intra_node_gbps = 0;    // GB/s per GPU, one direction, inside a node
  double inter_node_gbps = 0;    // GB/s per GPU, one direction, between nodes
  // The memory-bound side of a GPU (docs/layout.md, "The time model"): HBM bandwidth (GB/s, datasheet) and the
  // streaming multiprocessors a matrix product's tiles spread over. 0: not modelled (CPU processes; a GPU whose
  // figures are unknown): element-wise work then costs nothing and products run at matmul_efficiency whatever
  // their shape.
  double hbm_gbps = 0;
  int sm_count = 0;
  // Fitted on published runs (tests/layout/data/published_runs.json; docs/layout.md, "Checked against published
  // runs"), stated with every result: the share of peak that large matrix products reach, of the HBM bandwidth
  // that element-wise kernels reach, and of the link bandwidths that collectives reach.
  double matmul_efficiency = kFittedMatmulEfficiency;
  double memory_efficiency = kFittedMemoryEfficiency;
  // The share of peak that FlashAttention's kernels reach on this GPU (its core of scores and values, forward and
  // backward), as their authors measured it: FlashAttention-2 reached 72% of an A100 (Dao 2023) but 35% of an H100
  // (Shah et al. 2024, who reached 75% there with FlashAttention-3's Hopper kernels). The presets take
  // FlashAttention-2's; a cluster file states its own where its runs use another kernel. --calibrate scales it with
  // matmul_efficiency.
  double attention_efficiency = kFittedMatmulEfficiency;
  double link_efficiency = 0.8;
  // Per-step latencies of a ring collective in microseconds (NCCL's tuning model, src/graph/tuning.cc, ring
  // with the Simple protocol: 3.4 per NVLink hop, 9.6 per network hop); a collective also pays NCCL's base
  // latency of 8.4 once.
  double intra_node_latency_us = 3.4;
  double inter_node_latency_us = 9.6;
  // The share of tensor-parallel communication that runs behind the matrix products beside it (Megatron-Core's
  // --tp-comm-overlap splits them into chunks to do so); 0: exposed, as Megatron-LM ran it in 2021 and 2022.
  double tp_overlap = 0;
  // Bytes per GPU kept out of the planner's reach (the CUDA context, NCCL's buffers, fragmentation).
  double reserved_gib = 4;
  // CPU processes on one machine (this machine's runs): the cores every rank shares. More ranks computing at once
  // than cores slows each of them; 0 (the default): every GPU computes on its own.
  int host_cores = 0;
  // The optimizer step and the rest of a step outside the pipeline, per parameter a rank updates (nanoseconds);
  // 0 (the default): not modelled. --calibrate measures it.
  double update_ns_per_parameter = 0;
  // Measured step time over modelled (--calibrate): what the model leaves out (the runtime's messages and
  // bookkeeping; on a shared host, what more processes than cores cost), applied to every layout. 1: none.
  double step_time_factor = 1;

  double memory_bytes() const;
  void check() const;  // throws InvalidArgument naming the field and the rule
};

ClusterSpec parse_cluster_spec(const std::string& json_text, const std::string& source);
// "PRESETxN" (a preset and a GPU count: "h100-sxmx16384"), or a path to a JSON file.
ClusterSpec cluster_spec(const std::string& preset_or_path);
std::vector<std::string> cluster_preset_names();

}  // namespace dualpipe::layout

#include "dualpipe/layout/cluster_spec.h"

#include <cstdlib>
#include <utility>

#include "dualpipe/util/error.h"
#include "dualpipe/util/printable.h"
#include "layout/spec_json.h"

namespace dualpipe::layout {

namespace {

// FlashAttention-2's share of an H100's peak (FlashAttention-3's paper, Shah et al. 2024: "only 35% utilization").
constexpr double kFlashAttention2OnHopper = 0.35;

// Vendors' datasheet figures (docs/layout.md): dense 16-bit TFLOP/s, HBM bandwidth, SMs, NVLink and one 200/400
// Gb/s NIC per GPU, one direction each.
bool preset(const std::string& name, ClusterSpec& c) {
  c.gpus_per_node = 8, c.memory_gib = 80;
  if (name == "a100-80g") {
    c.peak_tflops = 312, c.hbm_gbps = 2039, c.sm_count = 108, c.intra_node_gbps = 300, c.inter_node_gbps = 25;
  } else if (name == "h100-sxm") {
    c.peak_tflops = 989, c.hbm_gbps = 3350, c.sm_count = 132, c.intra_node_gbps = 450, c.inter_node_gbps = 50;
    c.attention_efficiency = kFlashAttention2OnHopper;
  } else if (name == "h800") {  // NVLink cut to 400 GB/s both ways; DeepSeek-V3's cluster, 400 Gb/s IB per GPU
    c.peak_tflops = 989, c.hbm_gbps = 3350, c.sm_count = 132, c.intra_node_gbps = 200, c.inter_node_gbps = 50;
    c.attention_efficiency = kFlashAttention2OnHopper;
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> cluster_preset_names() { return {"a100-80g", "h100-sxm", "h800"}; }

double ClusterSpec::memory_bytes() const { return (memory_gib - reserved_gib) * kBytesPerGiB; }

void ClusterSpec::check() const {
  // Every field within a documented range (docs/layout.md, "Cluster files"): beyond it the figures stop meaning
  // anything (1e-300 TFLOP/s gives step times of 300 digits) or overflow.
  const std::string what = "cluster '" + printable_line(name) + "': ";
  const auto within = [&](const char* field, auto value, decltype(value) low, decltype(value) high,
                          const char* note = "") {
    DUALPIPE_REQUIRE(value >= low && value <= high, what, field, "=", value, " must be between ", low, " and ", high,
                     note);
  };
  within("gpus", gpus, 1, kMaxClusterGpus);
  within("gpus_per_node", gpus_per_node, 1, 1024);
  DUALPIPE_REQUIRE(gpus <= gpus_per_node || gpus % gpus_per_node == 0, what, "gpus=", gpus,
                   " must be a multiple of gpus_per_node=", gpus_per_node, " (whole nodes)");
  within("reserved_gib", reserved_gib, 0.0, 65536.0);
  within("memory_gib", memory_gib, 1e-3, 65536.0);
  DUALPIPE_REQUIRE(memory_gib > reserved_gib, what, "memory_gib=", memory_gib, " must be above reserved_gib=",
                   reserved_gib);
  within("peak_tflops", peak_tflops, 1e-3, 1e6, " (1 GFLOP/s to 1 EFLOP/s)");
  // Up to 1 EB/s: a link that costs nothing, as a model of one machine's shared memory.
  within("intra_node_gbps", intra_node_gbps, 1e-3, 1e9, " (1 MB/s to 1 EB/s)");
  within("inter_node_gbps", inter_node_gbps, 1e-3, 1e9, " (1 MB/s to 1 EB/s)");
  within("hbm_gbps", hbm_gbps, 0.0, 1e9, " (0: not modelled)");
  within("sm_count", sm_count, 0, 1 << 20, " (0: not modelled)");
  for (const auto& [field, share] : {std::pair{"matmul_efficiency", matmul_efficiency},
                                     std::pair{"memory_efficiency", memory_efficiency},
                                     std::pair{"attention_efficiency", attention_efficiency},
                                     std::pair{"link_efficiency", link_efficiency}})
    DUALPIPE_REQUIRE(share > 0 && share <= 1, what, field, "=", share, " must be above 0 and at most 1");
  within("intra_node_latency_us", intra_node_latency_us, 0.0, 1e6);
  within("inter_node_latency_us", inter_node_latency_us, 0.0, 1e6);
  within("tp_overlap", tp_overlap, 0.0, 1.0, " (the share of tensor-parallel traffic hidden)");
  within("host_cores", host_cores, 0, 1 << 16, " (0: each GPU computes on its own)");
  within("update_ns_per_parameter", update_ns_per_parameter, 0.0, 1e6, " (0: not modelled)");
  within("step_time_factor", step_time_factor, 1e-2, 1e2, " (1: nothing added)");
}

ClusterSpec parse_cluster_spec(const std::string& json_text, const std::string& source) {
  ClusterSpec c;
  c.name = source;
  SpecObject object(json_text, source);
  object.read("name", c.name), object.read("gpus", c.gpus), object.read("gpus_per_node", c.gpus_per_node);
  object.read("memory_gib", c.memory_gib), object.read("peak_tflops", c.peak_tflops);
  object.read("intra_node_gbps", c.intra_node_gbps), object.read("inter_node_gbps", c.inter_node_gbps);
  object.read("hbm_gbps", c.hbm_gbps), object.read("sm_count", c.sm_count);
  object.read("matmul_efficiency", c.matmul_efficiency), object.read("memory_efficiency", c.memory_efficiency);
  object.read("link_efficiency", c.link_efficiency), object.read("attention_efficiency", c.attention_efficiency);
  object.read("intra_node_latency_us", c.intra_node_latency_us);
  object.read("inter_node_latency_us", c.inter_node_latency_us), object.read("tp_overlap", c.tp_overlap);
  object.read("reserved_gib", c.reserved_gib), object.read("host_cores", c.host_cores);
  object.read("update_ns_per_parameter", c.update_ns_per_parameter);
  object.read("step_time_factor", c.step_time_factor);
  object.refuse_unknown();
  object.require({"gpus", "memory_gib", "peak_tflops", "intra_node_gbps", "inter_node_gbps"});
  c.check();
  return c;
}

ClusterSpec cluster_spec(const std::string& preset_or_path) {
  const size_t x = preset_or_path.rfind('x');
  ClusterSpec c;
  if (x != std::string::npos && x + 1 < preset_or_path.size() && preset(preset_or_path.substr(0, x), c)) {
    const std::string count = preset_or_path.substr(x + 1);
    char* end = nullptr;
    const long gpus = std::strtol(count.c_str(), &end, 10);
    DUALPIPE_REQUIRE(*end == '\0' && count.find_first_not_of("0123456789") == std::string::npos && gpus > 0 &&
                         gpus <= kMaxClusterGpus,
                     "--cluster '", preset_or_path, "': the GPU count after 'x' must be a whole number from 1 to ",
                     kMaxClusterGpus, ", got '", count, "'");
    c.name = preset_or_path;
    c.gpus = int(gpus);
    c.check();
    return c;
  }
  DUALPIPE_REQUIRE(!preset(preset_or_path, c), "--cluster '", preset_or_path,
                   "': a preset needs its GPU count, as in '", preset_or_path, "x64'");
  return parse_cluster_spec(read_spec_file(preset_or_path, "--cluster"), preset_or_path);
}

}  // namespace dualpipe::layout

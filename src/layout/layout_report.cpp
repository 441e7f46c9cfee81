#include "dualpipe/layout/layout_report.h"

#include <nlohmann/json.hpp>

#include "dualpipe/layout/train_command.h"
#include "dualpipe/util/byte_size.h"
#include "dualpipe/util/number_format.h"
#include "dualpipe/util/printable.h"
#include "layout/report_parts.h"

namespace dualpipe::layout {

std::string layout_name(const Layout& l) {
  std::string text = "tp" + std::to_string(l.tp) + " cp" + std::to_string(l.cp) + " pp" + std::to_string(l.pp);
  if (l.vpp > 1) text += "x" + std::to_string(l.vpp);
  text += " dp" + std::to_string(l.dp);
  if (l.ep > 1) text += " ep" + std::to_string(l.ep);
  return text;
}

namespace {

std::string calibration_line(const Calibration& c) {
  const Layout& l = c.layout;
  std::string text = "calibrated on '" + printable_line(c.source) + "' (";
  if (c.steps > 0) {
    text += "pp" + std::to_string(l.pp) + (l.vpp > 1 ? "x" + std::to_string(l.vpp) : "") + " " + l.schedule + ", " +
            std::to_string(c.steps) + " steps, ";
  } else {
    text += std::to_string(l.pp) + (l.pp > 1 ? " stages, " : " stage, ");
  }
  text += "micro-batches of " + std::to_string(l.micro_batch_size) + "): ";
  text += formatted("F+B of a micro-batch %.2f ms measured, %.2f ms modelled at %.1f%%, so %.2f%% of peak\n",
                        1e3 * c.measured_seconds, 1e3 * c.modelled_seconds, 100 * c.stated_efficiency,
                        100 * c.matmul_efficiency);
  if (c.step_seconds > 0)
    text += formatted("  %.1f ms between steps measured, so %.1f ns per parameter a rank updates; ",
                          1e3 * c.between_steps_seconds, c.update_ns_per_parameter) +
            formatted("step %.1f ms measured, %.1f ms modelled, so x%.3f for the rest\n", 1e3 * c.step_seconds,
                          1e3 * c.modelled_step_seconds, c.step_time_factor);
  return text;
}

}  // namespace

std::string layout_header(const LayoutRequest& request, const Calibration* calibration) {
  const ModelSpec& m = request.model;
  const ClusterSpec& c = request.cluster;
  // Billions for the presets, millions for a model small enough to train here.
  const bool billions = m.total_parameters() >= 1e9;
  const double unit = billions ? 1e9 : 1e6;
  std::string text = "model " + printable_line(m.name) + ": " +
                     formatted(billions ? "%.1fB parameters, %.1fB active per token"
                                            : "%.2fM parameters, %.2fM active per token",
                                   m.total_parameters() / unit, m.active_parameters() / unit);
  text += ", " + std::to_string(m.layers) + " layers, sequence " + std::to_string(m.seq_len) + "\n";
  text += "cluster " + printable_line(c.name) + ": " + std::to_string(c.gpus) + " GPUs, " +
          std::to_string(c.gpus_per_node) +
          " per node, " +
          formatted("%g GiB (%g GiB reserved), %g TFLOP/s, links %g GB/s", c.memory_gib, c.reserved_gib,
                        c.peak_tflops, c.intra_node_gbps) +
          formatted(" in a node and %g GB/s between nodes\n", c.inter_node_gbps);
  if (c.host_cores > 0) text += "ranks share " + std::to_string(c.host_cores) + " host cores\n";
  if (calibration) text += calibration_line(*calibration);
  text += formatted("assumed: matrix products at %.3g%% of peak, FlashAttention at %.3g%%, ", 100 * c.matmul_efficiency,
                    100 * c.attention_efficiency);
  if (c.hbm_gbps > 0)
    text += formatted("memory-bound work at %.3g%% of %g GB/s HBM, ", 100 * c.memory_efficiency, c.hbm_gbps);
  text += formatted("collectives at %.0f%% of link bandwidth; ", 100 * c.link_efficiency);
  text += "global batch " + std::to_string(request.global_batch) + " sequences\n";
  return text;
}

namespace {

std::string header(const LayoutRequest& request, const LayoutSearch& search, const Calibration* calibration) {
  std::string text = layout_header(request, calibration);
  text += "searched " + std::to_string(search.layouts) + " layouts that divide, " +
          std::to_string(search.over_memory) + " over memory at every ZeRO stage, " +
          std::to_string(search.simulated) + " pipelines simulated (the rest bounded out), " +
          std::to_string(search.schedules) + " schedules generated (" + describe_bytes(search.schedule_bytes) +
          " estimated in all)\n\n";
  return text;
}

}  // namespace

std::string layout_table(const LayoutRequest& request, const LayoutSearch& search, const Calibration* calibration) {
  std::string text = header(request, search, calibration);
  text +=
      "  #  layout                      zero recompute  schedule          mbs     M   memory GiB (param+grad+opt+act)"
      "      step s  compute recomp   tp   cp   ep   dp bubble  tok/s/GPU   MFU\n";
  int rank = 0;
  for (const LayoutResult& r : search.ranked) {
    const Layout& l = r.layout;
    const LayoutMemory& mem = r.memory;
    char line[512];
    std::snprintf(line, sizeof line,
                  "%3d  %-27s %4d %-10s %-16s %4d %5d %6.1f%s = %5.1f+%5.1f+%5.1f+%5.1f %8.3f %7.0f%% %5.0f%% %3.0f%% "
                  "%3.0f%% %3.0f%% %3.0f%% %5.0f%% %10.0f %4.1f%%\n",
                  ++rank, layout_name(l).c_str(), l.zero, recompute_name(l.recompute), l.schedule.c_str(),
                  l.micro_batch_size, l.microbatches, mem.total() / kBytesPerGiB, r.fits ? " " : "!",
                  mem.parameters / kBytesPerGiB, mem.gradients / kBytesPerGiB, mem.optimizer / kBytesPerGiB,
                  mem.activations / kBytesPerGiB,
                  r.time.step, 100 * r.time.compute / r.time.step, 100 * r.time.recompute / r.time.step,
                  100 * r.time.tp / r.time.step,
                  100 * r.time.cp / r.time.step, 100 * r.time.ep / r.time.step, 100 * r.time.dp / r.time.step,
                  100 * r.bubble_fraction, r.tokens_per_second_per_gpu, 100 * r.mfu);
    text += line;
  }
  if (search.ranked.empty()) text += "(no layout fits in memory; --include-unfit lists the closest)\n";
  std::string commands, why_not;
  rank = 0;
  for (const LayoutResult& r : search.ranked) {
    const TrainCommand train = train_command(request.model, request.cluster, r);
    ++rank;
    if (train.command) commands += formatted("%3d  ", rank) + *train.command + "\n";
    else if (why_not.empty()) why_not = train.why_not;
  }
  if (!commands.empty()) text += "\nto run a layout on this machine's processes:\n" + commands;
  else if (request.cluster.gpus <= request.cluster.gpus_per_node && !why_not.empty())
    text += "\nno dualpipe train command: " + why_not + "\n";
  text += "\nmemory per GPU against " + formatted("%.1f", request.cluster.memory_bytes() / kBytesPerGiB) +
          " GiB usable ('!' marks a layout over it); step time split on the busiest rank: compute, recomputation, "
          "exposed tp/cp/ep/dp\ncommunication, bubble (idle, pipeline messages included); MFU counts model FLOPs "
          "(6 x active parameters + 12 x layers x hidden x sequence per token)\n";
  text += "the rest of each step is the optimizer's update";
  text += request.cluster.step_time_factor != 1 ? " and what the calibration's step_time_factor adds\n" : "\n";
  return text;
}

nlohmann::ordered_json layout_result_json(const LayoutResult& r) {
  const Layout& l = r.layout;
  const LayoutTime& t = r.time;
  nlohmann::ordered_json row;
  row["tp"] = l.tp, row["cp"] = l.cp, row["pp"] = l.pp, row["vpp"] = l.vpp, row["dp"] = l.dp, row["ep"] = l.ep;
  row["zero"] = l.zero, row["recompute"] = recompute_name(l.recompute), row["schedule"] = l.schedule;
  row["micro_batch_size"] = l.micro_batch_size, row["microbatches"] = l.microbatches;
  row["sequence_parallel"] = l.sequence_parallel, row["dp_overlap"] = l.dp_overlap;
  row["flash_attention"] = l.flash_attention;
  row["memory_bytes"] = {{"parameters", r.memory.parameters}, {"gradients", r.memory.gradients},
                         {"optimizer", r.memory.optimizer},   {"activations", r.memory.activations},
                         {"optimizer_step", r.memory.optimizer_step}, {"total", r.memory.total()},
                         {"limit", r.memory_limit}};
  row["step_seconds"] = t.step;
  row["time_seconds"] = {{"compute", t.compute}, {"recompute", t.recompute}, {"tp", t.tp},
                         {"cp", t.cp},           {"ep", t.ep},               {"bubble", t.bubble},
                         {"dp", t.dp},           {"update", t.update},       {"other", t.other}};
  row["hidden_seconds"] = {{"tp", t.tp_hidden}, {"cp", t.cp_hidden}, {"ep", t.ep_hidden}, {"dp", t.dp_hidden}};
  row["compute_efficiency"] = t.compute_efficiency;
  row["tokens_per_second_per_gpu"] = r.tokens_per_second_per_gpu;
  row["mfu"] = r.mfu;
  row["tflops_per_gpu"] = r.tflops_per_gpu;
  row["hardware_tflops_per_gpu"] = r.hardware_tflops_per_gpu;
  row["bubble_fraction"] = r.bubble_fraction;
  row["peak_stage_activations"] = r.peak_stage_activations;
  row["parameter_copies"] = r.parameter_copies;
  row["fits"] = r.fits;
  row["plan_command"] =
      r.plan_command.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.plan_command);
  return row;
}

nlohmann::ordered_json layout_request_json(const LayoutRequest& request, const Calibration* calibration) {
  nlohmann::ordered_json out;
  const ModelSpec& m = request.model;
  const ClusterSpec& c = request.cluster;
  out["model"] = {{"name", m.name},
                  {"parameters", m.total_parameters()},
                  {"active_parameters", m.active_parameters()},
                  {"flops_per_token", model_flops_per_token(m)}};
  out["cluster"] = {{"name", c.name},           {"gpus", c.gpus},
                    {"gpus_per_node", c.gpus_per_node}, {"memory_gib", c.memory_gib},
                    {"reserved_gib", c.reserved_gib},   {"peak_tflops", c.peak_tflops},
                    {"intra_node_gbps", c.intra_node_gbps}, {"inter_node_gbps", c.inter_node_gbps},
                    {"hbm_gbps", c.hbm_gbps}, {"sm_count", c.sm_count},
                    {"matmul_efficiency", c.matmul_efficiency}, {"memory_efficiency", c.memory_efficiency},
                    {"attention_efficiency", c.attention_efficiency},
                    {"link_efficiency", c.link_efficiency}, {"intra_node_latency_us", c.intra_node_latency_us},
                    {"inter_node_latency_us", c.inter_node_latency_us}, {"tp_overlap", c.tp_overlap},
                    {"host_cores", c.host_cores}, {"update_ns_per_parameter", c.update_ns_per_parameter},
                    {"step_time_factor", c.step_time_factor}};
  if (calibration) {
    const Layout& l = calibration->layout;
    out["calibration"] = {{"trace", calibration->source},
                          {"pp", l.pp},
                          {"vpp", l.vpp},
                          {"schedule", l.schedule},
                          {"micro_batch_size", l.micro_batch_size},
                          {"steps", calibration->steps},
                          {"measured_seconds", calibration->measured_seconds},
                          {"modelled_seconds", calibration->modelled_seconds},
                          {"stated_matmul_efficiency", calibration->stated_efficiency},
                          {"matmul_efficiency", calibration->matmul_efficiency},
                          {"between_steps_seconds", calibration->between_steps_seconds},
                          {"update_ns_per_parameter", calibration->update_ns_per_parameter},
                          {"step_seconds", calibration->step_seconds},
                          {"modelled_step_seconds", calibration->modelled_step_seconds},
                          {"step_time_factor", calibration->step_time_factor}};
  }
  out["global_batch"] = request.global_batch;
  return out;
}

std::string layout_json(const LayoutRequest& request, const LayoutSearch& search, const Calibration* calibration) {
  nlohmann::ordered_json out = layout_request_json(request, calibration);
  out["layouts"] = search.layouts;
  out["over_memory"] = search.over_memory;
  out["simulated"] = search.simulated;
  out["schedules"] = search.schedules;
  out["schedule_bytes"] = search.schedule_bytes;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const LayoutResult& r : search.ranked) {
    nlohmann::ordered_json row = layout_result_json(r);
    const TrainCommand train = train_command(request.model, request.cluster, r);
    row["train_command"] = train.command ? nlohmann::ordered_json(*train.command) : nlohmann::ordered_json(nullptr);
    rows.push_back(row);
  }
  out["rows"] = rows;
  return out.dump(2) + "\n";
}

}  // namespace dualpipe::layout

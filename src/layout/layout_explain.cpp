// --explain: one layout's predicted step taken apart, part by part, and its memory by part (docs/layout.md).
#include "dualpipe/layout/layout_report.h"

#include "dualpipe/util/number_format.h"
#include "layout/report_parts.h"

namespace dualpipe::layout {

namespace {

std::string how_layers_run(const Layout& l) {
  std::string text = l.sequence_parallel ? "sequence parallel" : "no sequence parallelism";
  text += l.flash_attention ? ", FlashAttention" : ", unfused attention (softmax and dropout on the scores)";
  text += l.dp_overlap ? ", gradient reduction behind the backward" : ", gradient reduction after the backward";
  return text;
}

std::string part(const char* name, double seconds, double step, const std::string& note) {
  return formatted("  %-18s %10.4f s %6.1f%%  ", name, seconds, 100 * seconds / step) + note + "\n";
}

std::string hidden(double seconds) { return formatted("exposed; %.4f s more ran behind compute", seconds); }

std::string gib(const char* name, double bytes, const std::string& note) {
  return formatted("  %-18s %8.2f GiB  ", name, bytes / kBytesPerGiB) + note + "\n";
}

}  // namespace

std::string layout_explanation(const LayoutRequest& request, const LayoutResult& r, const Calibration* calibration) {
  const Layout& l = r.layout;
  const LayoutTime& t = r.time;
  const ClusterSpec& c = request.cluster;
  std::string text = layout_header(request, calibration) + "\n";
  text += "layout " + layout_name(l) + formatted(", ZeRO-%d, %s recomputation, ", l.zero, recompute_name(l.recompute)) +
          (l.pp > 1 ? l.schedule : std::string("no pipeline")) +
          formatted(", micro-batches of %d, %d per replica\n", l.micro_batch_size, l.microbatches);
  text += "  " + how_layers_run(l) + "\n\n";
  text += formatted("step %.4f s on the busiest rank:\n", t.step);
  text += part("compute", t.compute, t.step,
               formatted("forward and backward; with the recomputation, %.1f%% of peak (%.0f of %g TFLOP/s)",
                         100 * t.compute_efficiency, t.compute_efficiency * c.peak_tflops, c.peak_tflops));
  text += part("recompute", t.recompute, t.step,
               l.recompute == Recompute::Full ? "each layer's forward again, before its backward"
               : t.recompute > 0              ? "the attention core again"
                                              : "none");
  text += part("tp communication", t.tp, t.step, hidden(t.tp_hidden));
  text += part("cp communication", t.cp, t.step, hidden(t.cp_hidden));
  text += part("ep communication", t.ep, t.step, hidden(t.ep_hidden));
  text += part("pipeline bubble", t.bubble, t.step,
               l.pp > 1 ? formatted("idle in the simulated %s of %d ranks and %d micro-batches, messages included",
                                    l.schedule.c_str(), l.pp, l.microbatches)
                        : std::string("no pipeline"));
  text += part("dp communication", t.dp, t.step, hidden(t.dp_hidden));
  text += part("optimizer", t.update, t.step,
               c.update_ns_per_parameter > 0 ? "calibrated rate per parameter updated"
                                             : "Adam's HBM traffic for the parameters this rank updates");
  if (t.other != 0) text += part("other", t.other, t.step, "what the calibration's step_time_factor adds");
  text += formatted("  %-18s %10.4f s  = %.0f tokens/s per GPU, %.1f TFLOP/s of model FLOPs (MFU %.1f%%), %.1f "
                    "executed\n\n",
                    "step", t.step, r.tokens_per_second_per_gpu, r.tflops_per_gpu, 100 * r.mfu,
                    r.hardware_tflops_per_gpu);
  const LayoutMemory& m = r.memory;
  text += formatted("memory per GPU on the rank holding the most: %.2f GiB of %.2f usable%s\n",
                    m.total() / kBytesPerGiB, r.memory_limit / kBytesPerGiB, r.fits ? "" : " (does not fit)");
  text += gib("parameters", m.parameters, formatted("16-bit, %g cop%s of the stages", r.parameter_copies,
                                                    r.parameter_copies == 1 ? "y" : "ies"));
  text += gib("gradients", m.gradients, "16-bit");
  text += gib("optimizer state", m.optimizer, "fp32 master weights, momentum and variance");
  const bool step_peak = m.optimizer_step > m.activations;
  text += gib("activations", m.activations,
              formatted("%g micro-batch stages in flight at the peak%s", r.peak_stage_activations,
                        step_peak ? "" : " (the peak)"));
  text += gib("optimizer step", m.optimizer_step,
              std::string("fp32 gradients the update casts, once the activations are freed") +
                  (step_peak ? " (the peak)" : ""));
  return text;
}

std::string layout_explanation_json(const LayoutRequest& request, const LayoutResult& result,
                                    const Calibration* calibration) {
  nlohmann::ordered_json out = layout_request_json(request, calibration);
  out["layout"] = layout_result_json(result);
  return out.dump(2) + "\n";
}

}  // namespace dualpipe::layout

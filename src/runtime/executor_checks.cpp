// Everything a caller can get wrong, checked before any message moves: the step's arguments, how its batches
// split into micro-batches, and (with declared boundaries) what each local stage takes and returns.
#include <torch/torch.h>

#include <algorithm>

#include "executor_impl.h"

namespace dualpipe::runtime {

using dualpipe::detail::concat;

namespace {

bool is_floating(at::ScalarType t) { return at::isFloatingType(t) || at::isComplexType(t); }

std::string spec_text(const TensorSpec& s) {
  return concat(c10::IntArrayRef(s.shape), " ", s.dtype, " on ", s.device,
                is_floating(s.dtype) ? (s.requires_grad ? " requiring grad" : " without grad") : "");
}

bool shape_fits(const torch::Tensor& t, const TensorSpec& s) {
  if (t.dim() != static_cast<int64_t>(s.shape.size())) return false;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (s.shape[d] != -1 && s.shape[d] != t.size(d)) return false;
  return true;
}

std::string microbatch_text(int m) { return m < 0 ? "the shape check" : concat("micro-batch ", m); }

// Cuts each tensor along dim 0 into `parts` micro-batches like torch.chunk, or explains why it cannot.
std::vector<Tensors> split_rows(const Tensors& batch, size_t parts, int rank, const char* what) {
  std::vector<Tensors> out(parts);
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& t = batch[i];
    DUALPIPE_REQUIRE(t.defined() && t.dim() >= 1, "rank ", rank, ": ", what, " tensor ", i,
                     " must have a batch dimension to split into ", parts, " micro-batches");
    const int64_t rows = t.size(0), k = static_cast<int64_t>(parts);
    const int64_t per = (rows + k - 1) / k;
    DUALPIPE_REQUIRE(rows >= k && (k - 1) * per < rows, "rank ", rank, ": ", what, " tensor ", i, " has ", rows,
                     " rows, which do not split into ", k, " micro-batches of ", per,
                     " rows with a non-empty last one (like torch.chunk); pass microbatch_", what,
                     "s to cut them yourself");
    auto chunks = t.chunk(k, 0);
    for (size_t p = 0; p < parts; ++p) out[p].push_back(chunks[p]);
  }
  return out;
}

}  // namespace

void Executor::Impl::check_output(int s, int m, const Tensors& outputs) const {
  DUALPIPE_REQUIRE(!outputs.empty(), "stage ", s, " returned no tensors for ", microbatch_text(m));
  for (size_t i = 0; i < outputs.size(); ++i)
    DUALPIPE_REQUIRE(outputs[i].defined(), "stage ", s, " returned an undefined tensor ", i, " for ",
                     microbatch_text(m));
  if (options.boundaries.empty() || (s + 1 == S() && !options.boundaries_include_ends)) return;
  const BoundarySpec& specs = options.boundaries[static_cast<size_t>(s) + 1];
  DUALPIPE_REQUIRE(outputs.size() == specs.size(), "stage ", s, " returned ", outputs.size(), " tensors for ",
                   microbatch_text(m), ", boundary ", s + 1, " declares ", specs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& t = outputs[i];
    const TensorSpec& spec = specs[i];
    // Gradients are checked only while training: forward-only outputs never require grad.
    const bool grad_differs = training && is_floating(spec.dtype) && t.requires_grad() != spec.requires_grad;
    DUALPIPE_REQUIRE(shape_fits(t, spec) && t.scalar_type() == spec.dtype && t.device() == spec.device &&
                         !grad_differs,
                     "stage ", s, " returned tensor ", i, " as ", t.sizes(), " ", t.scalar_type(), " on ",
                     t.device(), training && is_floating(t.scalar_type()) ? (t.requires_grad() ? " requiring grad" : " without grad") : "",
                     " for ", microbatch_text(m), ", boundary ", s + 1, " declares ", spec_text(spec),
                     " (the next stage's input; -1 matches any size)");
  }
}

// Each local stage runs once, without grad and in eval mode (no dropout draws, no running-statistics updates),
// on zeros shaped like its declared inputs (-1 taken as 1), and must return its declared outputs.
void Executor::Impl::check_stages_against_boundaries() {
  torch::NoGradGuard no_grad;
  const bool was_training = training;
  training = false;
  for (const auto& [s, st] : stages) {
    if (s == 0 && !options.boundaries_include_ends) continue;  // its inputs are the step's: checked as they come
    const BoundarySpec& in = options.boundaries[static_cast<size_t>(s)];
    for (size_t i = 0; i < in.size(); ++i)
      DUALPIPE_REQUIRE(in[i].device == stage_devices[static_cast<size_t>(s)], "boundary ", s, " declares tensor ", i,
                       " on ", in[i].device, " but stage ", s, " computes on ", stage_devices[static_cast<size_t>(s)]);
    Tensors zeros;
    for (const TensorSpec& spec : in) {
      std::vector<int64_t> shape = spec.shape;
      for (auto& d : shape) d = d == -1 ? 1 : d;
      zeros.push_back(torch::zeros(shape, torch::TensorOptions().dtype(spec.dtype).device(spec.device)));
    }
    auto module = st->module();
    std::vector<std::pair<std::shared_ptr<torch::nn::Module>, bool>> modes;
    for (const auto& sub : module->modules()) modes.emplace_back(sub, sub->is_training());
    module->eval();
    Tensors outputs;
    auto refuse = [&](const char* reason) {
      for (auto& [sub, mode] : modes) sub->train(mode);
      return InvalidArgument(
          concat("stage ", s, " failed on zeros shaped like its declared inputs (boundary ", s, "): ", reason));
    };
    try {
      outputs = st->forward(zeros);
    } catch (const c10::Error& e) {
      throw refuse(e.what_without_backtrace());
    } catch (const std::exception& e) {
      throw refuse(e.what());
    }
    for (auto& [sub, mode] : modes) sub->train(mode);
    check_output(s, -1, outputs);
  }
  training = was_training;
}

void Executor::Impl::check_args(const StepArgs& a) const {
  DUALPIPE_REQUIRE(a.num_microbatches == M(), "step() was asked for ", a.num_microbatches,
                   " micro-batches but the schedule has M=", M());
  if (!entering.empty()) {
    DUALPIPE_REQUIRE(a.inputs.empty() != a.microbatch_inputs.empty(), "rank ", rank, " feeds ", entering.size(),
                     " micro-batches into stage 0: give either inputs (whole batches) or microbatch_inputs, ",
                     a.inputs.empty() ? "got neither" : "got both");
    if (!a.microbatch_inputs.empty())
      DUALPIPE_REQUIRE(a.microbatch_inputs.size() == entering.size(), "rank ", rank, " feeds ", entering.size(),
                       " micro-batches into stage 0 but got ", a.microbatch_inputs.size(), " microbatch_inputs");
  }
  if (!loss_owned.empty() && (training || !a.labels.empty() || !a.microbatch_labels.empty())) {
    DUALPIPE_REQUIRE(!training || a.criterion, "rank ", rank, " computes the loss of ", loss_owned.size(),
                     " micro-batches but no criterion was given");
    DUALPIPE_REQUIRE(a.labels.empty() != a.microbatch_labels.empty(), "rank ", rank, " computes the loss of ",
                     loss_owned.size(), " micro-batches: give either labels (whole batches) or microbatch_labels, ",
                     a.labels.empty() ? "got neither" : "got both");
    if (!a.microbatch_labels.empty())
      DUALPIPE_REQUIRE(a.microbatch_labels.size() == loss_owned.size(), "rank ", rank, " computes the loss of ",
                       loss_owned.size(), " micro-batches but got ", a.microbatch_labels.size(),
                       " microbatch_labels");
  }
}

void Executor::Impl::split_batches(const StepArgs& a) {
  input_chunks.assign(M(), Tensors());
  label_chunks.assign(M(), Tensors());
  if (!entering.empty()) {
    const auto parts = a.inputs.empty() ? a.microbatch_inputs : split_rows(a.inputs, entering.size(), rank, "input");
    for (size_t i = 0; i < entering.size(); ++i) {
      const int m = entering[i];
      input_chunks[m] = parts[i];
      if (!options.boundaries.empty() && options.boundaries_include_ends) {
        const BoundarySpec& specs = options.boundaries[0];
        DUALPIPE_REQUIRE(parts[i].size() == specs.size(), "rank ", rank, ": micro-batch ", m, " has ",
                         parts[i].size(), " input tensors, boundary 0 declares ", specs.size());
        for (size_t t = 0; t < specs.size(); ++t)
          DUALPIPE_REQUIRE(shape_fits(parts[i][t], specs[t]) && parts[i][t].scalar_type() == specs[t].dtype,
                           "rank ", rank, ": input tensor ", t, " of micro-batch ", m, " is ", parts[i][t].sizes(),
                           " ", parts[i][t].scalar_type(), ", boundary 0 declares ", spec_text(specs[t]));
      }
    }
  }
  if (!loss_owned.empty() && (!a.labels.empty() || !a.microbatch_labels.empty())) {
    const auto parts = a.labels.empty() ? a.microbatch_labels : split_rows(a.labels, loss_owned.size(), rank, "label");
    for (size_t i = 0; i < loss_owned.size(); ++i) label_chunks[loss_owned[i]] = parts[i];
  }
}

}  // namespace dualpipe::runtime

// One handler per action type. They move tensors between the step's slots, the stage modules and the
// mailbox; none of them knows which schedule produced the action list.
#include <torch/torch.h>

#include "executor_impl.h"

namespace dualpipe::runtime {

using detail::Direction;

namespace {
// Marks the store as deferring for the duration of an I action, also when the backward throws.
class Deferral {
 public:
  Deferral(WeightGradStore& store, int s, int m) : store_(store) { store_.begin_deferring(s, m); }
  ~Deferral() { store_.end_deferring(); }

 private:
  WeightGradStore& store_;
};
}  // namespace

torch::Tensor Executor::Impl::forward_input(int s, int m) {
  Slot& sl = slot(s, m);
  if (s == 0) {
    DUALPIPE_CHECK(input_chunks[m].defined(), "no input for micro-batch ", m);
    sl.input = input_chunks[m];
  } else {
    DUALPIPE_CHECK(sl.input.defined(), "forward of stage ", s, " micro-batch ", m, " before its input arrived");
    // A fresh leaf, so the backward stops here and leaves the gradient to send in input.grad().
    if (training) sl.input = sl.input.detach().requires_grad_(true);
  }
  return sl.input;
}

void Executor::Impl::finish_forward(int s, int m, const torch::Tensor& output) {
  Slot& sl = slot(s, m);
  if (!options.boundaries.empty()) {
    const TensorSpec& spec = options.boundaries[s + 1];
    DUALPIPE_REQUIRE(output.sizes() == c10::IntArrayRef(spec.shape) && output.scalar_type() == spec.dtype,
                     "stage ", s, " returned ", output.sizes(), " ", output.scalar_type(), " for micro-batch ", m,
                     ", the executor was declared with ", c10::IntArrayRef(spec.shape), " ", spec.dtype);
  }
  sl.output = output;
  if (s + 1 < S()) {
    if (local(s + 1, m)) slot(s + 1, m).input = output.detach();
    if (!training && local(s + 1, m)) sl.output = torch::Tensor();
    if (!training) sl.input = torch::Tensor();
    return;
  }
  if (label_chunks[m].defined() && args->criterion) {
    sl.loss = args->criterion(output, label_chunks[m]);
    result.losses[m] = sl.loss.detach();
  }
  if (args->return_outputs) result.outputs[m] = output.detach();
  if (!training) sl = Slot{};
}

BackwardHalf Executor::Impl::backward_half(int s, int m) {
  Slot& sl = slot(s, m);
  BackwardHalf half;
  half.stage = &stage(s);
  if (s == S() - 1) {
    DUALPIPE_CHECK(sl.loss.defined(), "backward of the last stage for micro-batch ", m, " without a loss");
    half.roots = {sl.loss};
  } else {
    DUALPIPE_CHECK(sl.output.defined() && sl.output_grad.defined(), "backward of stage ", s, " micro-batch ", m,
                   " before its forward or its output gradient");
    half.roots = {sl.output};
    half.grads = {sl.output_grad};
  }
  return half;
}

void Executor::Impl::finish_backward(int s, int m) {
  Slot& sl = slot(s, m);
  torch::Tensor input_grad;
  if (s > 0) {
    input_grad = sl.input.grad();
    // A stage whose output does not depend on its input still owes the previous stage a gradient.
    if (!input_grad.defined()) input_grad = torch::zeros_like(sl.input);
  }
  sl = Slot{};  // frees the activations and the graph
  if (s > 0) {
    if (local(s - 1, m)) {
      slot(s - 1, m).output_grad = input_grad;
    } else {
      sl.input_grad = input_grad;
    }
  }
}

void Executor::Impl::on_forward(const Action& a) {
  torch::Tensor input = forward_input(a.stage, a.microbatch);
  finish_forward(a.stage, a.microbatch, stage(a.stage).forward(input));
}

void Executor::Impl::on_backward(const Action& a) {
  if (!training) return;
  backward_half(a.stage, a.microbatch).run();
  finish_backward(a.stage, a.microbatch);
}

void Executor::Impl::on_backward_input(const Action& a) {
  if (!training) return;
  BackwardHalf half = backward_half(a.stage, a.microbatch);
  {
    Deferral deferral(store, a.stage, a.microbatch);
    half.run();
  }
  finish_backward(a.stage, a.microbatch);
}

void Executor::Impl::on_backward_weight(const Action& a) {
  if (!training) return;
  store.run(a.stage, a.microbatch);
}

void Executor::Impl::on_overlapped(const Action& a) {
  torch::Tensor input = forward_input(a.stage, a.microbatch);
  if (!training) {  // inference: only the forward half exists
    finish_forward(a.stage, a.microbatch, stage(a.stage).forward(input));
    return;
  }
  BackwardHalf half = backward_half(a.bwd_stage, a.bwd_microbatch);
  torch::Tensor output = stage(a.stage).overlapped_forward_backward(input, half);
  finish_forward(a.stage, a.microbatch, output);
  finish_backward(a.bwd_stage, a.bwd_microbatch);
}

void Executor::Impl::on_send_forward(const Action& a) {
  Slot& sl = slot(a.stage, a.microbatch);
  DUALPIPE_CHECK(sl.output.defined(), "SEND_F before the forward of stage ", a.stage, " micro-batch ", a.microbatch);
  mail->send(Direction::Forward, a.stage, a.microbatch, comm_rank(a.peer), sl.output);
  if (!training) sl.output = torch::Tensor();
}

void Executor::Impl::on_recv_forward(const Action& a) {
  slot(a.stage, a.microbatch).input = mail->take(Direction::Forward, a.stage - 1, a.microbatch);
}

void Executor::Impl::on_send_backward(const Action& a) {
  if (!training) return;
  Slot& sl = slot(a.stage, a.microbatch);
  DUALPIPE_CHECK(sl.input_grad.defined(), "SEND_B before the backward of stage ", a.stage, " micro-batch ",
                 a.microbatch);
  mail->send(Direction::Backward, a.stage, a.microbatch, comm_rank(a.peer), sl.input_grad);
  sl.input_grad = torch::Tensor();
}

void Executor::Impl::on_recv_backward(const Action& a) {
  if (!training) return;
  slot(a.stage, a.microbatch).output_grad = mail->take(Direction::Backward, a.stage + 1, a.microbatch);
}

}  // namespace dualpipe::runtime

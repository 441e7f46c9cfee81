// One handler per action type. They move tensors between the step's slots, the stage modules and the
// mailbox; none of them knows which schedule produced the action list.
#include <torch/torch.h>

#include <algorithm>

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

// Runs an I action's backward with the user's own deferral on (UserWeightDeferral), and files what it deferred
// under (s, m) for the W action.
template <typename Backward>
void with_user_deferral(const UserWeightDeferral& user, WeightGradStore& store, int s, int m, Backward&& backward) {
  if (!user) {
    backward();
    return;
  }
  user.begin();
  try {
    backward();
  } catch (...) {
    user.end();  // the step fails: what was put aside is dropped with it
    throw;
  }
  if (WeightGradStore::Task deferred = user.end()) store.add(s, m, std::move(deferred));
}

// A stage input as the stage sees it: a fresh leaf where it carries a gradient back, so the backward stops
// here and leaves that gradient to send.
torch::Tensor as_input(const torch::Tensor& t, bool requires_grad, c10::Device device) {
  torch::Tensor x = t.device() == device ? t.detach() : t.detach().to(device);
  return requires_grad ? x.requires_grad_(true) : x;
}

bool no_input_gradient(const Tensors& inputs) {
  return std::none_of(inputs.begin(), inputs.end(), [](const torch::Tensor& t) { return t.requires_grad(); });
}

}  // namespace

Tensors Executor::Impl::forward_inputs(int s, int m) {
  Slot& sl = slot(s, m);
  if (s == 0) {
    DUALPIPE_CHECK(!input_chunks[m].empty(), "no input for micro-batch ", m);
    sl.inputs = input_chunks[m];
  }
  DUALPIPE_CHECK(!sl.inputs.empty(), "forward of stage ", s, " micro-batch ", m, " before its inputs arrived");
  return sl.inputs;
}

void Executor::Impl::finish_forward(int s, int m, Tensors outputs, torch::Tensor loss) {
  check_output(s, m, outputs);
  Slot& sl = slot(s, m);
  if (s + 1 < S()) {
    if (local(s + 1, m)) {
      Tensors next;
      for (const auto& t : outputs)
        next.push_back(as_input(t, training && t.requires_grad(), stage_devices[static_cast<size_t>(s) + 1]));
      slot(s + 1, m).inputs = std::move(next);
    }
    sl.outputs = std::move(outputs);  // SEND_F reads them; a backward keeps them
    if (!training) sl.inputs.clear();
    if (!training && local(s + 1, m)) sl.outputs.clear();
    return;
  }
  if (!label_chunks[m].empty() && args->criterion) {
    sl.loss = loss.defined() ? std::move(loss) : args->criterion(outputs, label_chunks[m]);
    // Its backward would find no graph to run (a crash in LibTorch's autograd, not an error).
    DUALPIPE_REQUIRE(!training || sl.loss.requires_grad(), "the loss of micro-batch ", m,
                     " does not require grad: the criterion returned a tensor outside the autograd graph (a "
                     "constant, or computed from detached or integer tensors, or from a last stage whose outputs "
                     "carry no gradient); a training step needs a loss computed from the last stage's outputs "
                     "(or run the step under torch.no_grad())");
    result.losses[m] = sl.loss.detach();
  }
  if (args->return_outputs) {
    Tensors detached;
    for (const auto& t : outputs) detached.push_back(t.detach());
    result.outputs[m] = std::move(detached);
  }
  if (training) {
    sl.outputs = std::move(outputs);
  } else {
    sl = Slot{};
  }
}

// Recomputation: keep the outputs' values and whether they carry a gradient, drop everything the graph saved.
void Executor::Impl::drop_graph(int s, int m) {
  Slot& sl = slot(s, m);
  for (auto& t : sl.outputs) t = t.requires_grad() ? t.detach().requires_grad_(true) : t.detach();
  if (sl.loss.defined()) sl.loss = sl.loss.detach();
  sl.needs_recompute = true;
}

// Rebuilds the graph that drop_graph dropped: the same forward (and loss) on the same input leaves.
void Executor::Impl::recompute_forward(int s, int m) {
  Slot& sl = slot(s, m);
  if (!sl.needs_recompute) return;
  c10::DeviceGuard guard(stage_devices[static_cast<size_t>(s)]);
  sl.outputs = stage(s).forward(sl.inputs);
  if (s == S() - 1) sl.loss = args->criterion(sl.outputs, label_chunks[m]);
  sl.needs_recompute = false;
}

// Runs the backward of (s, m) and leaves the gradients of its inputs in the slot for finish_backward. `split`:
// only the input gradients now, the parameter gradients at the W action.
BackwardHalf Executor::Impl::backward_half(int s, int m, bool split) {
  recompute_forward(s, m);
  Slot& sl = slot(s, m);
  Tensors roots, grads;
  if (s == S() - 1) {
    DUALPIPE_CHECK(sl.loss.defined(), "backward of the last stage for micro-batch ", m, " without a loss");
    roots = {sl.loss};
    grads = {torch::Tensor()};
  } else {
    DUALPIPE_CHECK(!sl.outputs.empty() && sl.output_grads.size() == sl.outputs.size(), "backward of stage ", s,
                   " micro-batch ", m, " before its forward or its output gradients");
    for (size_t i = 0; i < sl.outputs.size(); ++i) {
      if (!sl.outputs[i].requires_grad() || !sl.output_grads[i].defined()) continue;
      roots.push_back(sl.outputs[i]);
      grads.push_back(sl.output_grads[i]);
    }
  }
  const bool generic = split && options.weight_split == WeightSplit::Generic;
  std::optional<c10::Stream> stream;
  if (!roots.empty() && roots[0].grad_fn() && !roots[0].is_cpu()) stream = roots[0].grad_fn()->stream();
  if (generic && !roots.empty() && no_input_gradient(sl.inputs)) return nothing_until_weight(s, m, roots, grads, stream);
  BackwardHalf half{[this, s, m, split, generic, roots, grads] {
    Slot& sl = slot(s, m);
    c10::DeviceGuard guard(stage_devices[static_cast<size_t>(s)]);
    if (roots.empty()) {  // no output carries a gradient: nothing to do but owe zeros
      sl.input_grads.assign(sl.inputs.size(), torch::Tensor());
    } else if (generic) {
      with_user_deferral(options.user_deferral, store, s, m, [&] {
        sl.input_grads = detail::backward_input(roots, grads, sl.inputs, sl.weight, options.runs_once);
      });
      sl.weight_pending = true;
    } else if (split) {
      Deferral deferral(store, s, m);
      with_user_deferral(options.user_deferral, store, s, m,
                         [&] { sl.input_grads = detail::backward_full(roots, grads, sl.inputs); });
    } else {
      sl.input_grads = detail::backward_full(roots, grads, sl.inputs);
    }
  }, {}, stream};
  if (!split) {
    half.stage = s;
    half.owner = &stage(s);
    half.inputs = sl.inputs;
    half.roots = std::move(roots);
    half.root_grads = std::move(grads);
    half.collect = [this, s, m] { slot(s, m).input_grads = detail::accumulated_input_grads(slot(s, m).inputs); };
  }
  return half;
}

// An I whose stage takes no input that carries a gradient (the first stage's token ids) has no input gradient to
// compute: the whole backward is its W's, and W runs it as the stage runs a lone B (as phases where the stage can,
// each exchange waited for where its result is first used), not as autograd's weight pass that waits for each.
BackwardHalf Executor::Impl::nothing_until_weight(int s, int m, const Tensors& roots, const Tensors& grads,
                                                  std::optional<c10::Stream> stream) {
  BackwardHalf whole{[roots, grads] { detail::backward_full(roots, grads, {}); }, {}, stream};
  whole.stage = s;
  whole.owner = &stage(s);
  whole.inputs = slot(s, m).inputs;
  whole.roots = roots;
  whole.root_grads = grads;
  whole.collect = [] {};  // no input gradient to take
  return BackwardHalf{[this, s, m, whole = std::move(whole)] {
    Slot& sl = slot(s, m);
    sl.input_grads.assign(sl.inputs.size(), torch::Tensor());
    sl.whole_at_w = whole;
    sl.weight_pending = true;
  }};
}

// Hands the gradients of the stage's inputs to the previous stage (or to SEND_B) and frees what the backward no
// longer needs; the pending W state of an I stays.
void Executor::Impl::finish_backward(int s, int m, Tensors input_grads) {
  Slot& sl = slot(s, m);
  // An input that carries a gradient but did not influence the loss still owes the previous stage one.
  for (size_t i = 0; i < sl.inputs.size(); ++i)
    if (sl.inputs[i].requires_grad() && !input_grads[i].defined()) input_grads[i] = torch::zeros_like(sl.inputs[i]);
  Tensors inputs = std::move(sl.inputs);
  sl.inputs.clear();
  sl.outputs.clear();
  sl.output_grads.clear();
  sl.loss = torch::Tensor();
  sl.input_grads.clear();
  if (s == 0) return;
  if (local(s - 1, m)) {
    slot(s - 1, m).output_grads = std::move(input_grads);  // aligned: stage s's inputs are stage s-1's outputs
    return;
  }
  Tensors to_send;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].requires_grad()) to_send.push_back(input_grads[i]);
  sl.input_grads = std::move(to_send);
}

void Executor::Impl::on_forward(const Action& a) {
  Tensors inputs = forward_inputs(a.stage, a.microbatch);
  c10::DeviceGuard guard(stage_devices[static_cast<size_t>(a.stage)]);
  finish_forward(a.stage, a.microbatch, stage(a.stage).forward(inputs));
  if (training && options.recompute) drop_graph(a.stage, a.microbatch);
}

void Executor::Impl::on_backward(const Action& a) {
  if (!training) return;
  stage(a.stage).backward(backward_half(a.stage, a.microbatch, false));
  finish_backward(a.stage, a.microbatch, slot(a.stage, a.microbatch).input_grads);
}

void Executor::Impl::on_backward_input(const Action& a) {
  if (!training) return;
  backward_half(a.stage, a.microbatch, true).run();
  finish_backward(a.stage, a.microbatch, slot(a.stage, a.microbatch).input_grads);
}

void Executor::Impl::on_backward_weight(const Action& a) {
  if (!training) return;
  backward_weight(a.stage, a.microbatch);
}

void Executor::Impl::backward_weight(int s, int m) {
  Slot& sl = slot(s, m);
  c10::DeviceGuard guard(stage_devices[static_cast<size_t>(s)]);
  if (sl.whole_at_w) stage(s).backward(*std::exchange(sl.whole_at_w, std::nullopt));
  sl.weight.run();
  sl.weight_pending = false;
  store.run(s, m);
}

void Executor::Impl::on_overlapped(const Action& a) {
  Tensors inputs = forward_inputs(a.stage, a.microbatch);
  c10::DeviceGuard guard(stage_devices[static_cast<size_t>(a.stage)]);
  if (!training) {  // inference: only the forward half exists
    finish_forward(a.stage, a.microbatch, stage(a.stage).forward(inputs));
    return;
  }
  const bool weights_last = options.pair_weights_last && options.weight_split == WeightSplit::Generic;
  BackwardHalf half = backward_half(a.bwd_stage, a.bwd_microbatch, weights_last);
  if (weights_last)
    half.weight = [this, s = a.bwd_stage, m = a.bwd_microbatch] { backward_weight(s, m); };
  ForwardLoss loss;
  if (a.stage == S() - 1 && args->criterion && !label_chunks[a.microbatch].empty())
    loss.labels = &label_chunks[a.microbatch];
  Tensors outputs = stage(a.stage).overlapped_pair(inputs, half, loss);
  finish_forward(a.stage, a.microbatch, std::move(outputs), loss.loss);
  if (options.recompute) drop_graph(a.stage, a.microbatch);
  finish_backward(a.bwd_stage, a.bwd_microbatch, slot(a.bwd_stage, a.bwd_microbatch).input_grads);
}

void Executor::Impl::on_send_forward(const Action& a) {
  Slot& sl = slot(a.stage, a.microbatch);
  DUALPIPE_CHECK(!sl.outputs.empty(), "SEND_F before the forward of stage ", a.stage, " micro-batch ", a.microbatch);
  mail->send({Direction::Forward, a.stage, a.microbatch}, comm_rank(a.peer), sl.outputs);
  if (!training) sl.outputs.clear();
}

void Executor::Impl::on_recv_forward(const Action& a) {
  detail::Message message = mail->take({Direction::Forward, a.stage - 1, a.microbatch});
  Tensors inputs;
  for (size_t i = 0; i < message.tensors.size(); ++i)
    inputs.push_back(as_input(message.tensors[i], training && message.requires_grad[i],
                              stage_devices[static_cast<size_t>(a.stage)]));
  slot(a.stage, a.microbatch).inputs = std::move(inputs);
}

void Executor::Impl::on_send_backward(const Action& a) {
  if (!training) return;
  Slot& sl = slot(a.stage, a.microbatch);
  mail->send({Direction::Backward, a.stage, a.microbatch}, comm_rank(a.peer), sl.input_grads);
  sl.input_grads.clear();
}

// The message holds the gradients of the outputs that require one, in order; the others get none.
void Executor::Impl::on_recv_backward(const Action& a) {
  if (!training) return;
  detail::Message message = mail->take({Direction::Backward, a.stage + 1, a.microbatch});
  Slot& sl = slot(a.stage, a.microbatch);
  Tensors grads(sl.outputs.size());
  size_t k = 0;
  for (size_t i = 0; i < sl.outputs.size(); ++i)
    if (sl.outputs[i].requires_grad()) {
      DUALPIPE_REQUIRE(k < message.tensors.size(), "stage ", a.stage + 1, " sent ", message.tensors.size(),
                       " gradients for micro-batch ", a.microbatch, " but stage ", a.stage,
                       " has more outputs that require one");
      grads[i] = message.tensors[k++];
    }
  DUALPIPE_REQUIRE(k == message.tensors.size(), "stage ", a.stage + 1, " sent ", message.tensors.size(),
                   " gradients for micro-batch ", a.microbatch, " but stage ", a.stage, " has ", k,
                   " outputs that require one");
  sl.output_grads = std::move(grads);
}

}  // namespace dualpipe::runtime

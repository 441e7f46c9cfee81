// One step of a pipeline schedule on one rank: a compute action (F, B, I, W or an overlapped F&B pair)
// or an action derived from them by a lowering pass: communication between stages, and the data-parallel
// collectives around compute (gathering ZeRO-3 parameters, dropping them, reducing gradients).
//
// Text forms follow torch.distributed.pipelining so schedules can be exchanged:
//   "0F1" forward of micro-batch 1 at stage 0, "3B5" full backward, "2I0" input-gradient backward,
//   "2W0" its deferred weight gradients, "(0F3;3B5)" an overlapped pair, "1SEND_F0" / "2RECV_B4" communication,
//   "3UNSHARD", "3RESHARD", "3REDUCE_GRAD" a stage's data-parallel collectives (no micro-batch).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dualpipe {

enum class ActionType : std::uint8_t {
  Forward,         // F
  Backward,        // B: input and weight gradients
  BackwardInput,   // I: input gradients only, weight gradients deferred
  BackwardWeight,  // W: the deferred weight gradients of an earlier I
  Overlapped,      // (F;B): a forward and a full backward run as one unit
  SendForward,     // SEND_F: send the output of stage's forward to the next stage's rank
  RecvForward,     // RECV_F: receive the input of stage's forward from the previous stage's rank
  SendBackward,    // SEND_B: send the input gradient of stage's backward to the previous stage's rank
  RecvBackward,    // RECV_B: receive the output gradient for stage's backward from the next stage's rank
  Unshard,         // UNSHARD: start gathering the stage's parameters sharded over the data-parallel replicas
  Reshard,         // RESHARD: drop the gathered parameters of the stage that other replicas own
  ReduceGrad,      // REDUCE_GRAD: start reducing the stage's gradients over the data-parallel replicas
};

// The short name used in text forms: "F", "B", "I", "W", "OVERLAP_F_B", "SEND_F", ...
std::string_view type_name(ActionType type);

struct Action {
  ActionType type = ActionType::Forward;
  std::int32_t stage = 0;       // for an overlapped pair: the forward half's stage
  std::int32_t microbatch = 0;  // for an overlapped pair: the forward half's one; -1 for a data-parallel action
  std::int32_t bwd_stage = -1;  // overlapped pair only: the backward half
  std::int32_t bwd_microbatch = -1;
  std::int32_t peer = -1;       // communication only: the rank on the other end

  static Action forward(int stage, int microbatch) { return {ActionType::Forward, stage, microbatch}; }
  static Action backward(int stage, int microbatch) { return {ActionType::Backward, stage, microbatch}; }
  static Action backward_input(int stage, int microbatch) {
    return {ActionType::BackwardInput, stage, microbatch};
  }
  static Action backward_weight(int stage, int microbatch) {
    return {ActionType::BackwardWeight, stage, microbatch};
  }
  static Action overlapped(int fwd_stage, int fwd_microbatch, int bwd_stage, int bwd_microbatch) {
    return {ActionType::Overlapped, fwd_stage, fwd_microbatch, bwd_stage, bwd_microbatch};
  }
  static Action communication(ActionType type, int stage, int microbatch, int peer) {
    return {type, stage, microbatch, -1, -1, peer};
  }
  static Action data_parallel(ActionType type, int stage) { return {type, stage, -1}; }

  bool is_compute() const { return type <= ActionType::Overlapped; }
  // SEND/RECV between pipeline stages.
  bool is_communication() const { return type >= ActionType::SendForward && type <= ActionType::RecvBackward; }
  // UNSHARD, RESHARD, REDUCE_GRAD: a stage's collectives over the data-parallel replicas, run beside compute.
  bool is_data_parallel() const { return type >= ActionType::Unshard; }
  // The halves of an overlapped pair, as plain F and B actions.
  Action forward_half() const { return forward(stage, microbatch); }
  Action backward_half() const { return backward(bwd_stage, bwd_microbatch); }

  friend bool operator==(const Action& a, const Action& b) {
    return a.type == b.type && a.stage == b.stage && a.microbatch == b.microbatch &&
           a.bwd_stage == b.bwd_stage && a.bwd_microbatch == b.bwd_microbatch && a.peer == b.peer;
  }
  friend bool operator!=(const Action& a, const Action& b) { return !(a == b); }
};

// "0F1", "(0F3;3B5)", "1SEND_F0", "2UNSHARD". The peer of a communication action is not part of the text.
std::string to_string(const Action& action);

// A compute action's record_function region in a PyTorch profiler trace, as the runtime names it and `dualpipe
// plan --from-kineto` reads it (docs/profile.md): its kind and its stage, a pair's its forward's ("forward stage 3",
// "backward_input stage 0", "forward_backward stage 5").
std::string profiler_region(const Action& action);

// Parses the forms above; throws InvalidArgument naming the text and what was expected.
// A parsed communication action has peer = -1 (it is derived from the placement).
Action parse_action(std::string_view text);

}  // namespace dualpipe

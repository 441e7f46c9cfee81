// Every message tag the project uses, allocated here and nowhere else.
//
// Correctness never depends on tags: between two ranks, the messages of one channel travel in one order that
// both sides derive from the same data (the lowered schedule, the parameter list, the rank order), so a
// backend that ignores tags (NCCL) delivers the same bytes. Tags only keep channels apart on backends that
// honour them, which turns a protocol bug into an error instead of silently wrong data. The communicator's
// single-tag test mode (ProcessGroupCommunicatorOptions::single_tag) sends everything with tag 0 to prove it.
#pragma once

namespace dualpipe::comm {

enum class Channel : int {
  Pipeline = 1,      // activations and gradients between stages, in the lowered schedule's order
  Replica = 2,       // gradient reduction between the two replicas of a stage (DualPipe, Chimera)
  ClockPing = 3,     // clock alignment with rank 0 (clock_sync.h)
  ClockPong = 4,
  Gather = 5,        // gather_to_root: lengths then data, one rank at a time
  Application = 16,  // first tag free for a program's own messages (training job statistics, tests)
};

constexpr int tag(Channel channel) { return static_cast<int>(channel); }
// The i-th tag of a program's own channels.
constexpr int application_tag(int i) { return tag(Channel::Application) + i; }

}  // namespace dualpipe::comm

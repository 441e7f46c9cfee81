// Every message tag the project uses, allocated here and nowhere else.
//
// Correctness never depends on tags: between two ranks, the messages of one channel travel in one order that
// both sides derive from the same data (the lowered schedule, the parameter list, the rank order), so a
// backend that ignores tags (NCCL) delivers the same bytes. Tags only keep channels apart on backends that
// honour them, which turns a protocol bug into an error instead of silently wrong data. One exception, taken
// only where the communicator says it matches by tag (Communicator::matches_by_tag): the pipeline then posts a
// step's receives ahead, its headers, tensors and re-sent tensors on three tags (runtime/mailbox.h). The communicator's
// single-tag test mode (ProcessGroupCommunicatorOptions::single_tag) sends everything with tag 0 to prove it.
#pragma once

namespace dualpipe::comm {

enum class Channel : int {
  Pipeline = 1,      // activations and gradients between stages, in the lowered schedule's order: their headers
  PipelineTensors = 6,  // where the communicator matches by tag: their tensors (runtime/mailbox.h)
  PipelineResent = 7,   // and a message's tensors sent again at their own shapes after the zeros of a wrong guess
  Replica = 2,       // gradient reduction between the two replicas of a stage (DualPipe, Chimera)
  ClockPing = 3,     // clock alignment with rank 0 (clock_sync.h)
  ClockPong = 4,
  Gather = 5,        // gather_to_root: lengths then data, one rank at a time
  // The training loop's (src/train/).
  ReplicaCheck = 16,   // step 1's comparison of the data-parallel replicas' parameters
  StepStats = 17,      // each rank's step statistics, gathered on rank 0
  ReplicaStats = 18,   // how many tensors the replica checks compared
  GradNorm = 19,       // the sum of squared gradients, for clipping
  Eval = 20,           // validation loss sums
  Sample = 21,         // the next token of a generated sample
  ShardRecords = 22,   // which checkpoint shards each rank wrote
  AllToAllTrace = 23,  // the all-to-all spans of a traced step
  Replan = 24,         // whether the ranks stop at this step for a re-plan (--on-straggler replan)
  Application = 32,    // first tag free for a program's own messages (examples, tests, benchmarks)
};

constexpr int tag(Channel channel) { return static_cast<int>(channel); }
// The i-th tag of a program's own channels.
constexpr int application_tag(int i) { return tag(Channel::Application) + i; }

}  // namespace dualpipe::comm

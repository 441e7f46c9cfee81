// One rank of the failure tests (test_failures.cpp), launched as a process with torchrun-style MASTER_ADDR,
// MASTER_PORT, RANK, WORLD_SIZE. It trains the example stages for a few steps under a schedule over Gloo, and
// after every step writes a checkpoint of its stages through the atomic writer. One rank can be told to fail:
//
//   runtime_failure_worker --kind dualpipe --steps 4 --timeout-ms 3000 --out DIR
//       [--fault kill|stop|kill-while-writing --fault-rank 2 --fault-step 2 --fault-after-forwards 3]
//
//   kill                 raise(SIGKILL) in the middle of step N, after K forwards of that step on this rank
//   stop                 raise(SIGSTOP) at the same point (a stuck process; the test kills it afterwards)
//   kill-while-writing   raise(SIGKILL) half-way through writing the checkpoint after step N
//   sleep                sleep --fault-seconds inside the K-th forward of step N (a rank stuck in an action)
//   lose                 the K-th message this rank sends in step N never leaves (a lost message)
//   mismatch             this rank runs its schedule with two more micro-batches than the others
//
// --stall-after-ms S starts a stall watch (runtime/stall_watch.h) that reports after S ms without progress, and
// writes the ranks' states and the report into DIR; SIGUSR1 asks for a report too.
//
// It writes its pid to DIR/rank<r>.pid first. Exit status: 0 when every step completed, 1 with "rank r failed: <error>" on stderr otherwise.
#include <torch/torch.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <map>
#include <string>

#include "dualpipe/comm/gloo_communicator.h"
#include "dualpipe/runtime/executor.h"
#include "dualpipe/runtime/mlp_stage.h"
#include "dualpipe/runtime/stall_watch.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/util/atomic_file.h"

namespace {

using namespace dualpipe;

struct Fault {
  std::string kind;  // empty: none
  int rank = -1, step = -1, after_forwards = 1;
  double seconds = 0;  // sleep's
};

// Completed at once: what a sender sees of a message the network dropped.
class DroppedWork : public comm::Work {
 public:
  void wait(std::chrono::milliseconds) override {}
  bool is_completed() override { return true; }
};

// The worker's communicator, except that the fault rank's K-th send of step N goes nowhere.
class LosingCommunicator : public comm::Communicator {
 public:
  LosingCommunicator(std::shared_ptr<comm::Communicator> inner, const Fault& fault, const int& step)
      : inner_(std::move(inner)), fault_(fault), step_(step) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::shared_ptr<comm::Work> isend(const at::Tensor& tensor, int dst, int tag) override {
    if (step_ != counted_step_) {
      counted_step_ = step_;
      sends_ = 0;
    }
    if (fault_.kind == "lose" && fault_.rank == rank() && fault_.step == step_ && ++sends_ == fault_.after_forwards) {
      std::cerr << "rank " << rank() << ": losing send " << sends_ << " of step " << step_ << " to rank " << dst
                << std::endl;
      return std::make_shared<DroppedWork>();
    }
    return inner_->isend(tensor, dst, tag);
  }
  std::shared_ptr<comm::Work> irecv(at::Tensor& tensor, int src, int tag) override {
    return inner_->irecv(tensor, src, tag);
  }
  void barrier() override { inner_->barrier(); }
  std::chrono::milliseconds timeout() const override { return inner_->timeout(); }

 private:
  std::shared_ptr<comm::Communicator> inner_;
  const Fault& fault_;
  const int& step_;
  int counted_step_ = -1, sends_ = 0;
};

// Counts the forwards of the step in flight and fails on the K-th one when told to.
class FaultStage : public runtime::Stage {
 public:
  FaultStage(runtime::MlpStage module, const Fault& fault, const int& step, int& forwards, int rank)
      : module_(std::move(module)), fault_(fault), step_(step), forwards_(forwards), rank_(rank) {}

  runtime::Tensors forward(const runtime::Tensors& input) override {
    if (fault_.rank == rank_ && fault_.step == step_ && ++forwards_ == fault_.after_forwards) {
      if (fault_.kind == "kill") {
        std::cerr << "rank " << rank_ << ": dying in the middle of step " << step_ << std::endl;
        ::raise(SIGKILL);
      } else if (fault_.kind == "stop") {
        std::cerr << "rank " << rank_ << ": stopping in the middle of step " << step_ << std::endl;
        ::raise(SIGSTOP);
      } else if (fault_.kind == "sleep") {
        std::cerr << "rank " << rank_ << ": sleeping " << fault_.seconds << " s in forward " << forwards_
                  << " of step " << step_ << std::endl;
        std::this_thread::sleep_for(std::chrono::duration<double>(fault_.seconds));
      }
    }
    return {module_->forward(input.at(0))};
  }
  std::shared_ptr<torch::nn::Module> module() const override { return module_.ptr(); }

 private:
  runtime::MlpStage module_;
  const Fault& fault_;
  const int& step_;
  int& forwards_;
  int rank_;
};

// A text checkpoint whose last line says how many values came before it, so a reader can tell a complete file.
void write_checkpoint(const std::string& path, const std::map<int, std::shared_ptr<runtime::Stage>>& stages,
                      int step, int rank, bool die_half_way) {
  write_file_atomically(path, [&](std::ostream& out) {
    out << "dualpipe-test-checkpoint rank " << rank << " step " << step << "\n";
    long values = 0;
    for (const auto& [s, stage] : stages) {
      for (const auto& p : stage->parameters()) {
        auto flat = p.detach().flatten();
        for (int64_t i = 0; i < flat.numel(); ++i) {
          out << flat[i].item<float>() << "\n";
          if (++values == 100 && die_half_way) {
            out.flush();  // half a file on disk under the temporary name
            std::cerr << "rank " << rank << ": dying while writing the checkpoint of step " << step << std::endl;
            ::raise(SIGKILL);
          }
        }
      }
    }
    out << "end " << values << "\n";
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::string kind = "dualpipe", out_dir = ".";
  int steps = 4;
  long timeout_ms = 60000, stall_after_ms = 0;
  Fault fault;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i], value = argv[i + 1];
    if (key == "--kind") kind = value;
    else if (key == "--steps") steps = std::atoi(value.c_str());
    else if (key == "--timeout-ms") timeout_ms = std::atol(value.c_str());
    else if (key == "--out") out_dir = value;
    else if (key == "--fault") fault.kind = value;
    else if (key == "--fault-rank") fault.rank = std::atoi(value.c_str());
    else if (key == "--fault-step") fault.step = std::atoi(value.c_str());
    else if (key == "--fault-after-forwards") fault.after_forwards = std::atoi(value.c_str());
    else if (key == "--fault-seconds") fault.seconds = std::atof(value.c_str());
    else if (key == "--stall-after-ms") stall_after_ms = std::atol(value.c_str());
    else {
      std::cerr << "unknown option " << key << "\n";
      return 2;
    }
  }
  int rank = -1;
  try {
    runtime::install_stall_signal();  // before the pid file: a test signals once it is there
    // The pid, for a test that runs the workers under `dualpipe launch` and checks none is left.
    if (const char* r = std::getenv("RANK"))
      write_file_atomically(out_dir + "/rank" + r + ".pid", std::to_string(::getpid()) + "\n");
    at::set_num_threads(1);
    auto gloo = comm::GlooCommunicator::from_environment(std::chrono::milliseconds(timeout_ms));
    rank = gloo->rank();
    const int R = gloo->size();
    int step = -1, forwards = 0;
    auto communicator = std::make_shared<LosingCommunicator>(gloo, fault, step);
    const int microbatches = fault.kind == "mismatch" && fault.rank == rank ? 2 * R + 2 : 2 * R;
    Schedule schedule = make_schedule(kind, {R, microbatches});
    const int64_t hidden = 8, rows = 2;

    std::map<int, std::shared_ptr<runtime::Stage>> stages;
    for (int m = 0; m < schedule.num_microbatches; ++m)
      for (int s = 0; s < schedule.num_stages; ++s)
        if (schedule.placement.rank(s, m) == rank && !stages.count(s)) {
          torch::manual_seed(s);  // replicas of a stage start equal
          stages[s] = std::make_shared<FaultStage>(runtime::MlpStage(hidden), fault, step, forwards, rank);
        }
    runtime::ExecutorOptions options;
    options.boundaries = runtime::ExecutorOptions::uniform({{{rows, hidden}, torch::kFloat}}, schedule.num_stages);
    runtime::Executor executor(schedule, stages, communicator, options);
    runtime::StallWatchOptions watch_options;
    watch_options.after = std::chrono::milliseconds(stall_after_ms);
    watch_options.world_rank = rank;
    watch_options.world_size = R;
    watch_options.directory = out_dir;
    runtime::StallWatch watch(executor.flight_recorder(), gloo->peer_monitor(), watch_options);

    torch::manual_seed(100 + rank);
    runtime::StepArgs args;
    args.num_microbatches = schedule.num_microbatches;
    args.inputs = {torch::randn({static_cast<int64_t>(executor.entering_microbatches().size()) * rows, hidden})};
    if (!executor.loss_microbatches().empty())
      args.labels = {torch::randn({static_cast<int64_t>(executor.loss_microbatches().size()) * rows, hidden})};
    args.criterion = runtime::single_tensor_criterion([](const torch::Tensor& o, const torch::Tensor& l) { return torch::mse_loss(o, l); });

    const std::string checkpoint = out_dir + "/rank" + std::to_string(rank) + ".ckpt";
    for (step = 0; step < steps; ++step) {
      forwards = 0;
      for (auto& [s, stage] : stages) stage->module()->zero_grad();
      executor.step(args);
      executor.reduce_replica_gradients();
      const bool die = fault.kind == "kill-while-writing" && fault.rank == rank && fault.step == step;
      write_checkpoint(checkpoint, stages, step, rank, die);
    }
    communicator->barrier();  // nobody tears down its transport while a peer still reads from it
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "rank " << rank << " failed: " << e.what() << std::endl;
    return 1;
  }
}

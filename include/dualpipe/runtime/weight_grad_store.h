// Deferred weight-gradient work of one executor (one rank).
//
// Zero Bubble and DualPipe split a backward into I (input gradients, needed by the previous stage now) and W
// (weight gradients, needed only at the optimizer step). While the executor runs an I action it marks its store
// as deferring for that (stage, micro-batch); split-aware layers (SplitLinear) then push a closure computing
// their dW instead of computing it. The W action runs that group. Layers that are not split-aware compute their
// weight gradients during I as usual, and W finds nothing to do.
//
// There is no global store: each executor owns one, and installs it as the calling thread's current store
// (Scope) while it runs a step, so ranks that are threads of one process never share deferred work.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <utility>
#include <vector>

namespace dualpipe::runtime {

class WeightGradStore {
 public:
  using Task = std::function<void()>;

  // Between these two calls, deferrable weight gradients are pushed into the group (stage, microbatch).
  void begin_deferring(int stage, int microbatch);
  void end_deferring();
  bool deferring() const { return deferring_; }

  // Adds work to the group being deferred; only valid while deferring().
  void defer(Task task);
  // Adds work to the group (stage, microbatch), deferring or not (UserWeightDeferral's work).
  void add(int stage, int microbatch, Task task);
  // Runs (in the order deferred) and forgets the group (stage, microbatch); nothing to do if it is empty.
  void run(int stage, int microbatch);

  std::size_t pending_groups() const { return groups_.size(); }
  void clear();

  // The store of the executor running on this thread, or nullptr outside a step.
  static WeightGradStore* current();

  // Installs a store as the thread's current one for the lifetime of the Scope.
  class Scope {
   public:
    explicit Scope(WeightGradStore* store);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    WeightGradStore* previous_;
  };

 private:
  bool deferring_ = false;
  std::pair<int, int> key_{-1, -1};
  std::map<std::pair<int, int>, std::vector<Task>> groups_;
};

// Weight-gradient work that a stage's own code defers by a protocol of its own while an I action runs: DeepSeek's
// WeightGradStore in Python, whose autograd Functions put their weight-gradient closures aside while it is enabled.
// The executor calls `begin` before the input-gradient backward of every I action and `end` after it (also when the
// backward throws); `end` returns what was put aside since `begin` (empty: nothing), and the matching W action runs
// it, after the W's own work.
struct UserWeightDeferral {
  std::function<void()> begin;
  std::function<WeightGradStore::Task()> end;
  explicit operator bool() const { return begin && end; }
};

}  // namespace dualpipe::runtime

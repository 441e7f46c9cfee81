#include "dualpipe/parallel/collective_completion.h"

#include <atomic>
#include <memory>

namespace dualpipe::parallel {

CompletionTime when_completed(const std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
  struct Pending {
    std::promise<std::chrono::steady_clock::time_point> done;
    std::atomic<int> left{0};
  };
  auto pending = std::make_shared<Pending>();
  CompletionTime completed = pending->done.get_future().share();
  std::vector<c10::intrusive_ptr<c10::ivalue::Future>> futures;
  try {
    for (const auto& work : works) futures.push_back(work->getFuture());
  } catch (const std::exception&) {
    return {};  // this backend's works have no futures
  }
  pending->left = static_cast<int>(futures.size());
  if (futures.empty()) pending->done.set_value(std::chrono::steady_clock::now());
  for (auto& future : futures)
    future->addCallback([pending](c10::ivalue::Future&) {
      if (--pending->left == 0) pending->done.set_value(std::chrono::steady_clock::now());
    });
  return completed;
}

}  // namespace dualpipe::parallel

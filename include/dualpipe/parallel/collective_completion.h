// When started c10d collectives really completed, seen from their own thread (each work's future callback), not
// when someone waited for them: a trace then shows how long a gradient reduction took beside the compute it hid
// behind (runtime::StartedReduction).
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <future>
#include <vector>

namespace dualpipe::parallel {

using CompletionTime = std::shared_future<std::chrono::steady_clock::time_point>;

// Ready with the time the last of `works` completed (at once for none); invalid when a work cannot tell (a c10d
// backend without futures).
CompletionTime when_completed(const std::vector<c10::intrusive_ptr<c10d::Work>>& works);

}  // namespace dualpipe::parallel

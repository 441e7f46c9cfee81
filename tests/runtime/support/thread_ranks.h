// Runs one function per rank on its own thread over an InProcessHub and gathers what each rank reports.
// A rank that throws aborts the hub, so the other ranks stop waiting at once instead of at the timeout.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dualpipe/comm/in_process_communicator.h"

namespace dualpipe::testing {

using RankFn = std::function<std::vector<std::string>(std::shared_ptr<comm::Communicator>)>;

// `single_tag`: the hub ignores tags, like NCCL (in_process_communicator.h).
inline std::vector<std::string> run_ranks(int num_ranks, const RankFn& fn,
                                          std::chrono::milliseconds timeout = std::chrono::seconds(30),
                                          bool single_tag = false) {
  auto hub = std::make_shared<comm::InProcessHub>(num_ranks, timeout, single_tag);
  std::vector<std::vector<std::string>> problems(num_ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < num_ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        problems[r] = fn(std::make_shared<comm::InProcessCommunicator>(hub, r));
      } catch (const std::exception& e) {
        problems[r].push_back("rank " + std::to_string(r) + " threw: " + e.what());
        hub->abort("rank " + std::to_string(r) + " failed");
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::string> all;
  for (auto& p : problems) all.insert(all.end(), p.begin(), p.end());
  return all;
}

}  // namespace dualpipe::testing

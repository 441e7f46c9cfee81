// Stands in for torchrun's elastic agent in the launcher tests: hosts the c10d TCPStore that torchrun's static
// rendezvous hosts for its workers (TORCHELASTIC_USE_AGENT_STORE=True), on 127.0.0.1:PORT for WORLD_SIZE workers,
// until SECONDS have passed. Prints "ready" once it listens. The store starts with what an earlier attempt of the
// job left in it: every rank's claim, with and without attempt 0's prefix, so that workers that do not keep to
// their own attempt's prefix fail ("two processes claim rank 0").
//   runtime_store_host PORT WORLD_SIZE SECONDS
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: runtime_store_host PORT WORLD_SIZE SECONDS\n";
    return 2;
  }
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(std::atoi(argv[1]));
  options.isServer = true;
  options.numWorkers = std::atoi(argv[2]);
  options.waitWorkers = false;
  c10d::TCPStore store("127.0.0.1", options);
  for (int rank = 0; rank < options.numWorkers; ++rank) {
    const std::string claim = "dualpipe/claims/" + std::to_string(rank);
    store.add(claim, 1);
    store.add("/worker/attempt_0/" + claim, 1);
  }
  std::cout << "ready" << std::endl;
  std::this_thread::sleep_for(std::chrono::seconds(std::atoi(argv[3])));
  return 0;
}

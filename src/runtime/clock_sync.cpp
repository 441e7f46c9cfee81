#include "dualpipe/runtime/clock_sync.h"

#include <torch/torch.h>

#include <limits>

#include "dualpipe/runtime/gather.h"

namespace dualpipe::runtime {
namespace {

constexpr int kPingTag = comm::tag(comm::Channel::ClockPing);
constexpr int kPongTag = comm::tag(comm::Channel::ClockPong);

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

double ClockSync::to_aligned_us(std::chrono::steady_clock::time_point t) const {
  const int64_t local = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return static_cast<double>(local + offset_ns - epoch_ns) / 1000.0;
}

ClockSync synchronize_clocks(comm::Communicator& communicator, int round_trips, std::chrono::milliseconds timeout) {
  DUALPIPE_REQUIRE(round_trips >= 1, "clock alignment needs at least one round trip, got ", round_trips);
  if (timeout.count() <= 0) timeout = communicator.timeout();
  ClockSync sync;
  torch::Tensor ping = torch::zeros({1}, torch::kLong);
  torch::Tensor pong = torch::zeros({3}, torch::kLong);  // t1, t2, epoch (rank 0's clock)
  if (communicator.rank() == 0) {
    sync.epoch_ns = now_ns();
    // One peer at a time, so a rank's exchange never queues behind another's.
    for (int peer = 1; peer < communicator.size(); ++peer) {
      for (int i = 0; i < round_trips; ++i) {
        communicator.irecv(ping, peer, kPingTag)->wait(timeout);
        const int64_t t1 = now_ns();
        auto* p = pong.data_ptr<int64_t>();
        p[0] = t1;
        p[2] = sync.epoch_ns;
        p[1] = now_ns();
        communicator.isend(pong, peer, kPongTag)->wait(timeout);
      }
    }
    return sync;
  }
  sync.round_trip_ns = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < round_trips; ++i) {
    auto reply = communicator.irecv(pong, 0, kPongTag);  // posted first, so the reply never waits for it
    const int64_t t0 = now_ns();
    ping.data_ptr<int64_t>()[0] = t0;
    auto sent = communicator.isend(ping, 0, kPingTag);
    reply->wait(timeout);
    const int64_t t3 = now_ns();
    sent->wait(timeout);
    const auto* p = pong.data_ptr<int64_t>();
    const int64_t round_trip = (t3 - t0) - (p[1] - p[0]);
    if (round_trip < sync.round_trip_ns) {
      sync.round_trip_ns = round_trip;
      sync.offset_ns = ((p[0] - t0) + (p[1] - t3)) / 2;
      sync.epoch_ns = p[2];
    }
  }
  return sync;
}

}  // namespace dualpipe::runtime

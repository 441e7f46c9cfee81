// Aligning the ranks' clocks at start-up, so that the actions recorded on different ranks (or machines) can be
// laid on one time axis. An NTP-style exchange with rank 0: a rank sends a ping stamped t0 on its own steady
// clock, rank 0 stamps its arrival t1 and its reply t2 on its clock, the rank stamps the reply's arrival t3.
// Assuming the two legs take equally long, rank 0's clock = own clock + ((t1 - t0) + (t2 - t3)) / 2, with an
// error of at most half the round trip (t3 - t0) - (t2 - t1). Several round trips run and the one with the
// smallest round trip wins (the least queueing, so the most symmetric legs).
#pragma once

#include <chrono>
#include <cstdint>

#include "dualpipe/comm/communicator.h"

namespace dualpipe::runtime {

struct ClockSync {
  // This rank's steady clock + offset_ns = rank 0's steady clock, in nanoseconds (0 on rank 0).
  int64_t offset_ns = 0;
  // The round trip of the exchange the offset came from: the offset is right to within half of it.
  int64_t round_trip_ns = 0;
  // Rank 0's steady clock when the alignment ran: time 0 of the aligned clock.
  int64_t epoch_ns = 0;

  // `t` (this rank's steady clock) in microseconds since the epoch on rank 0's clock.
  double to_aligned_us(std::chrono::steady_clock::time_point t) const;
};

// Every rank of the communicator calls it (a collective over service tags, see gather.h); `round_trips` >= 1
// exchanges per rank with rank 0. Throws CommError naming a rank that does not answer within `timeout` (0: the
// communicator's).
ClockSync synchronize_clocks(comm::Communicator& communicator, int round_trips = 8,
                             std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

}  // namespace dualpipe::runtime

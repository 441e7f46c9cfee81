// The error of a transfer or barrier that did not complete, worded the same way by every transport: the peer
// monitor's lost peer first (it names the root cause even when the wait was on a live neighbour), else the
// backend's failure worded with the peer it was about.
#pragma once

#include <chrono>
#include <string>

#include "dualpipe/comm/communicator.h"

namespace dualpipe::comm {

class PeerMonitor;

// `backend_error`: the transport's own text ("Timed out" when the wait ran out, empty when it was aborted).
// Reports the failure to the monitor, so that the other waits end too.
CommError wait_error(PeerMonitor* monitor, int self, const std::string& operation, int peer,
                     std::chrono::milliseconds timeout, const std::string& backend_error);

}  // namespace dualpipe::comm

#include "wait_error.h"

#include <optional>

#include "dualpipe/comm/peer_monitor.h"

namespace dualpipe::comm {

using dualpipe::detail::concat;

namespace {

std::string seconds_text(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return concat(d.count() / 1000, " s");
  return concat(static_cast<double>(d.count()) / 1000.0, " s");
}

}  // namespace

CommError wait_error(PeerMonitor* monitor, int self, const std::string& operation, int peer,
                     std::chrono::milliseconds timeout, const std::string& backend_error) {
  std::optional<PeerFailure> failure = monitor ? monitor->failure() : std::nullopt;
  if (!failure && !backend_error.empty()) {
    if (backend_error.find("imed out") != std::string::npos) {
      if (monitor) failure = monitor->silent_peer();
      std::string waited = concat("timed out after ", seconds_text(timeout));
      if (failure) {
        failure->reason = waited + "; " + failure->reason;
      } else {
        failure = PeerFailure{peer, peer >= 0 ? concat("rank ", peer, " did not answer: ", waited) : waited};
      }
    } else {
      // The connection broke, maybe a neighbour's that is leaving because of another rank: give the monitor a
      // moment to learn which.
      if (monitor) failure = monitor->await_failure(std::chrono::milliseconds(500));
      if (!failure)
        failure = PeerFailure{peer, peer >= 0 ? concat("peer rank ", peer, " closed the connection or failed (",
                                                       backend_error, ")")
                                              : concat("failed (", backend_error, ")")};
    }
    if (monitor) monitor->report(*failure);  // other waits end too, and this rank's departure passes the blame on
  }
  if (!failure) failure = PeerFailure{peer, "aborted"};
  return CommError(concat("rank ", self, ": ", operation, ": ", failure->reason), failure->rank, failure->reason,
                   failure->invalid_input);
}

}  // namespace dualpipe::comm

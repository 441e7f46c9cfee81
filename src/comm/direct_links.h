// GlooCommunicator's point-to-point messages on sockets of their own, read and written by the thread that waits.
//
// Through c10d, every Gloo message wakes three or four threads: the receiver's Gloo loop thread reads it and
// wakes the waiting rank; the sender's loop thread gets the "receive posted" notice; a watcher thread waits on
// each send so that its buffer can be released. With several ranks per core each wake-up waits for the scheduler,
// and the step of a pipeline whose stages compute little is bound by these hand-offs (docs/benchmarks.md,
// "Runtime host overhead"). Here a send is written at once by the sending thread (non-blocking; what does not fit in
// the socket's buffer is written later), and a rank that waits on any transfer reads and writes every link itself
// until its transfer is done, so one message costs one wake-up: the receiver's.
//
// Messages are a 16-byte header (tag, byte count) and the tensor's bytes; they are matched by (peer, tag) in the
// order they were posted, as Gloo matches them. A message that arrives before its receive is posted is kept aside.
// Progress happens only while some thread of the rank waits (or polls is_completed): a rank that computes for long
// without waiting holds back a large send to it, which the executor never does for long, since it waits on every
// receive before use. One thread polls the sockets at a time; the others wait for it to finish a pass.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dualpipe/comm/communicator.h"

namespace dualpipe::comm {

class PeerMonitor;

class DirectLinks {
 public:
  // Takes the sockets by peer rank (-1 at `rank`; connect_socket_mesh's) and owns them from then on. `monitor`
  // may be null; when it names a lost peer, every wait ends with its failure.
  DirectLinks(std::vector<int> sockets, int rank, PeerMonitor* monitor, std::chrono::milliseconds timeout);
  ~DirectLinks();
  DirectLinks(const DirectLinks&) = delete;
  DirectLinks& operator=(const DirectLinks&) = delete;

  // `tensor` contiguous on the CPU; semantics of Communicator::isend/irecv. Throws CommError at once when the
  // link to the peer is known to be broken.
  std::shared_ptr<Work> isend(const at::Tensor& tensor, int dst, int tag);
  std::shared_ptr<Work> irecv(at::Tensor& tensor, int src, int tag);

  struct Engine;

 private:
  std::shared_ptr<Engine> engine_;
};

}  // namespace dualpipe::comm

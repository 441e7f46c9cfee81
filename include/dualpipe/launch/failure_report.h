// Whom the launcher blames when ranks fail. A rank that dies takes its peers down with it, and they may well be
// reaped first; their errors name the rank they lost ("rank 2 stopped responding"). So the report blames the
// first failure by time, follows the names in the errors to the root cause, and says which ranks exited only
// because of it. Pure functions of the ranks' ends, so tests can drive them without processes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dualpipe::launch {

// How one rank of this node ended.
struct RankEnd {
  int rank = 0;                  // global rank
  int status = 0;                // waitpid() status
  std::uint64_t exit_order = 0;  // reaping pass that saw it end: 1, 2, ... (ranks reaped together share one)
  int blames = -1;               // the rank its last error line blames (blamed_rank), -1: none
};

// The rank a line of a rank's stderr says it failed because of, as the communicators word it ("rank 2 stopped
// responding", "rank 2 did not answer", "peer rank 2 closed the connection", "ranks 2, 3 never arrived" names
// the first); -1 when the line blames no other rank of a job of `world_size` ranks.
int blamed_rank(const std::string& line, int self, int world_size);

bool is_failure(int status);

// "exited with status 3", "was killed by signal 9 (SIGKILL)": how a process ended, from a waitpid() status.
std::string describe_wait_status(int status);
const char* signal_name(int signo);  // "SIGTERM"; nullptr for a signal without a name here

struct FailureReport {
  std::vector<std::string> lines;  // what the launcher says, one message each
  std::string cause;               // the root cause in a few words, for the restart log: "rank 2 was killed by ..."
};

// `ended`: this node's ranks that ended, at least one of them failed. `stopped`: ranks still running when the
// launcher began stopping them. `local_ranks`: how many ranks this node runs.
FailureReport describe_failure(const std::vector<RankEnd>& ended, int stopped, int local_ranks);

}  // namespace dualpipe::launch

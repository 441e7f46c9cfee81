// Blame and wording of rank failures (see failure_report.h).
#include "dualpipe/launch/failure_report.h"

#include <sys/wait.h>

#include <cctype>
#include <csignal>
#include <cstring>
#include <map>
#include <set>

#include "dualpipe/util/error.h"
#include "ranks_text.h"

namespace dualpipe::launch {
namespace {

std::string signal_text(int signo) {
  const char* name = signal_name(signo);
  return detail::concat("signal ", signo, name ? detail::concat(" (", name, ")") : std::string());
}

std::string list_text(const std::vector<int>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    text += detail::concat(i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ", ranks[i]);
  return text;
}

}  // namespace

const char* signal_name(int signo) {
  switch (signo) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return nullptr;
  }
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return detail::concat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return detail::concat("was killed by ", signal_text(WTERMSIG(status)), WCOREDUMP(status) ? " (core dumped)" : "");
  }
  return detail::concat("ended with wait status ", status);
}

bool is_failure(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

int blamed_rank(const std::string& line, int self, int world_size) {
  static const char* const kBlames[] = {" stopped responding", " did not answer", " closed the connection",
                                        " never arrived", " never joined"};
  for (std::size_t at = line.find("rank"); at != std::string::npos; at = line.find("rank", at + 1)) {
    std::size_t p = at + 4;
    if (p < line.size() && line[p] == 's') ++p;  // "ranks 2, 3 never arrived"
    if (p >= line.size() || line[p] != ' ') continue;
    ++p;
    const std::size_t digits = p;
    long n = 0;
    while (p < line.size() && std::isdigit(static_cast<unsigned char>(line[p])) && n < 1'000'000)
      n = n * 10 + (line[p++] - '0');
    if (p == digits || n == self || n >= world_size) continue;
    std::size_t rest = p;
    while (rest < line.size() &&
           (line[rest] == ',' || line[rest] == ' ' || std::isdigit(static_cast<unsigned char>(line[rest]))))
      ++rest;  // the other ranks of a list
    for (const char* blame : kBlames) {
      if (line.compare(p, std::strlen(blame), blame) == 0) return static_cast<int>(n);
      if (rest > p && line.compare(rest - 1, std::strlen(blame), blame) == 0) return static_cast<int>(n);
    }
  }
  return -1;
}

FailureReport describe_failure(const std::vector<RankEnd>& ended, int stopped, int local_ranks) {
  std::map<int, const RankEnd*> by_rank;
  for (const RankEnd& r : ended) by_rank[r.rank] = &r;

  // The first failure by time: the earliest reaping pass (ranks reaped together: one that blames no other rank
  // first, then the lowest). Later failures are only its consequences when their errors name it (directly, or
  // through a rank that names it).
  const RankEnd* first = nullptr;
  for (const RankEnd& r : ended) {
    if (!is_failure(r.status)) continue;
    if (!first || r.exit_order < first->exit_order ||
        (r.exit_order == first->exit_order && first->blames >= 0 && r.blames < 0)) {
      first = &r;
    }
  }
  DUALPIPE_CHECK(first != nullptr);
  // Follows the blame from rank to rank; stops at a rank that blames nobody, at a cycle, or at a rank of another
  // node (whose errors this launcher never sees).
  auto cause_of = [&](const RankEnd& r) {
    int cause = r.rank;
    std::set<int> seen;
    for (auto it = by_rank.find(cause); it != by_rank.end() && it->second->blames >= 0 && seen.insert(cause).second;
         it = by_rank.find(cause)) {
      cause = it->second->blames;
    }
    return cause;
  };
  const int culprit = cause_of(*first);
  const auto local_culprit = by_rank.find(culprit);
  const RankEnd* culprit_end = local_culprit == by_rank.end() ? nullptr : local_culprit->second;

  FailureReport report;
  std::vector<int> followers;  // failed and named the culprit: exited only because of it
  for (const RankEnd& r : ended) {
    if (r.rank == culprit || !is_failure(r.status) || r.blames < 0 || cause_of(r) != culprit) continue;
    followers.push_back(r.rank);
    report.lines.push_back(detail::concat("rank ", r.rank, " ", describe_wait_status(r.status), " only because of rank ",
                                          culprit, " (its error names rank ", r.blames, ")"));
  }

  if (culprit_end == first) {
    std::string what;
    if (local_ranks == 1) {
      // nothing to add: there was no other rank here
    } else if (stopped == 0) {
      what = "; no other rank was still running";
    } else if (stopped == local_ranks - 1) {
      what = stopped == 1 ? "; stopped the other rank" : detail::concat("; stopped the other ", stopped, " ranks");
    } else {
      what = detail::concat("; stopped the ", stopped, " other ", stopped == 1 ? "rank" : "ranks", " still running");
    }
    report.cause = detail::concat("rank ", first->rank, " ", describe_wait_status(first->status));
    report.lines.push_back(report.cause + what);
    return report;
  }
  const std::string consequences =
      detail::concat("rank", followers.size() == 1 ? " " : "s ", list_text(followers), " exited because of it");
  if (!culprit_end) {
    // Its own errors are on the other node; from here a dead rank and a dead link look the same.
    report.cause = detail::concat("rank ", culprit, " on another node was lost");
    report.lines.push_back(detail::concat("rank ", culprit, " runs on another node and was lost (it failed there, or "
                                          "the network to it did; see that node's launcher), and ", consequences,
                                          "; stopped ", ranks_text(stopped), " still running"));
    return report;
  }
  std::string state;
  if (!is_failure(culprit_end->status) || culprit_end->exit_order > first->exit_order) {
    state = detail::concat("was still running when rank ", first->rank, " exited");
    report.cause = detail::concat("rank ", culprit, " stopped responding");
  } else {
    state = describe_wait_status(culprit_end->status);
    report.cause = detail::concat("rank ", culprit, " ", state);
  }
  report.lines.push_back(detail::concat("rank ", culprit, " failed first: it ", state, ", and ", consequences,
                                        "; stopped ", ranks_text(stopped), " still running"));
  return report;
}

}  // namespace dualpipe::launch

#include "dualpipe/runtime/stall_report.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <set>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "dualpipe/util/error.h"

namespace dualpipe::runtime {

using dualpipe::detail::concat;
using json = nlohmann::json;

namespace {

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", s);
  return text;
}

double seconds_between(FlightClock::time_point from, FlightClock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

const char* kind_name(FlightKind kind) {
  switch (kind) {
    case FlightKind::Send: return "send";
    case FlightKind::Receive: return "receive";
    default: return "action";
  }
}

std::string wait_text(const RankStall::Wait& w) {
  return w.receive ? concat("waits for ", w.message, " from rank ", w.peer)
                   : concat("waits for its ", w.message, " to leave for rank ", w.peer);
}

std::string action_text(const RankStall::Event& e) {
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f ms", e.seconds * 1e3);
  return concat(e.name, " (", ms, ")");
}

// One rank's line: where it is, and its last few actions and messages.
std::string rank_line(const RankStall& s) {
  std::string line = concat("rank ", s.rank, " (step ", s.step + 1, "): ");
  if (s.wait) {
    line += concat(wait_text(*s.wait), " for ", seconds(s.wait->seconds));
    if (!s.action.empty()) line += concat(" (in ", s.action, ")");
  } else if (!s.action.empty()) {
    line += concat("inside ", s.action, " for ", seconds(s.action_seconds));
  } else {
    line += concat("between steps for ", seconds(s.idle_seconds));
  }
  // The last actions (their SEND and RECV actions say what the messages were; the JSON keeps the messages too).
  std::vector<std::string> last;
  for (auto it = s.recent.rbegin(); it != s.recent.rend() && last.size() < 4; ++it)
    if (it->kind == "action") last.insert(last.begin(), action_text(*it));
  for (size_t i = 0; i < last.size(); ++i) line += concat(i == 0 ? "; last: " : ", ", last[i]);
  return line;
}

template <typename T>
T field(const json& j, const char* name) {
  DUALPIPE_REQUIRE(j.is_object() && j.contains(name), "a rank's stall state has no field '", name, "'");
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // nlohmann converts a double, or an integer past T's range, with undefined behaviour.
    const json& v = j.at(name);
    DUALPIPE_REQUIRE(v.is_number_integer() && (v.is_number_unsigned()
                                                   ? v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max())
                                                   : v.get<int64_t>() >= std::numeric_limits<T>::min() &&
                                                         v.get<int64_t>() <= std::numeric_limits<T>::max()),
                     "a rank's stall state has a field '", name, "' that is not a whole number in range");
  }
  try {
    return j.at(name).get<T>();
  } catch (const json::exception&) {
    throw InvalidArgument(concat("a rank's stall state has a field '", name, "' of the wrong type"));
  }
}

// A number written as text (JSON keys; a 64-bit fingerprint, which a double would round), whole and in range.
template <typename T>
T number_in_text(const std::string& text, const char* what) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  DUALPIPE_REQUIRE(error == std::errc() && end == text.data() + text.size(), "a rank's stall state has ", what,
                   " '", text.substr(0, 40), "', not a number");
  return value;
}

std::map<int, int> counts_from_json(const json& j) {
  DUALPIPE_REQUIRE(j.is_object(), "a rank's stall state has message counts that are not an object");
  std::map<int, int> counts;
  for (const auto& [peer, n] : j.items()) {
    DUALPIPE_REQUIRE(n.is_number_integer() && n.get<int64_t>() >= 0 && n.get<int64_t>() <= 1'000'000'000,
                     "a rank's stall state has a message count that is not a whole number from 0 to 10^9");
    counts[number_in_text<int>(peer, "a peer")] = static_cast<int>(n.get<int64_t>());
  }
  return counts;
}

json counts_to_json(const std::map<int, int>& counts) {
  json j = json::object();
  for (const auto& [peer, n] : counts) j[std::to_string(peer)] = n;
  return j;
}

}  // namespace

RankStall rank_stall(const FlightSnapshot& snapshot, int world_rank, const std::vector<int>& to_world) {
  const auto world = [&](int r) {
    return r >= 0 && static_cast<size_t>(r) < to_world.size() ? to_world[static_cast<size_t>(r)] : r;
  };
  RankStall s;
  s.rank = world_rank;
  s.schedule = snapshot.schedule;
  s.fingerprint = snapshot.fingerprint;
  s.step = snapshot.step;
  s.in_step = snapshot.in_step;
  if (snapshot.in_step && snapshot.action) {
    s.action = to_string(snapshot.action->action);
    s.action_seconds = seconds_between(snapshot.action->start, snapshot.taken);
  }
  if (snapshot.wait)
    s.wait = RankStall::Wait{to_string(snapshot.wait->message), world(snapshot.wait->peer), snapshot.wait->receive,
                             snapshot.wait->position, seconds_between(snapshot.wait->since, snapshot.taken)};
  s.idle_seconds = seconds_between(snapshot.last_progress, snapshot.taken);
  for (const auto& [peer, n] : snapshot.sent) s.sent[world(peer)] = n;
  for (const auto& [peer, n] : snapshot.received) s.received[world(peer)] = n;
  for (const FlightEvent& e : snapshot.recent)
    s.recent.push_back({kind_name(e.kind), to_string(e.action), e.kind == FlightKind::Action ? -1 : world(e.action.peer),
                        e.bytes, e.step, seconds_between(e.end, snapshot.taken), seconds_between(e.start, e.end)});
  return s;
}

json to_json(const RankStall& s) {
  json j = {{"rank", s.rank},       {"schedule", s.schedule}, {"fingerprint", std::to_string(s.fingerprint)},
            {"step", s.step},       {"in_step", s.in_step},   {"action", s.action},
            {"action_seconds", s.action_seconds}, {"idle_seconds", s.idle_seconds},
            {"sent", counts_to_json(s.sent)},     {"received", counts_to_json(s.received)}};
  j["wait"] = nullptr;
  if (s.wait)
    j["wait"] = {{"message", s.wait->message}, {"peer", s.wait->peer}, {"receive", s.wait->receive},
                 {"position", s.wait->position}, {"seconds", s.wait->seconds}};
  j["recent"] = json::array();
  for (const auto& e : s.recent)
    j["recent"].push_back({{"kind", e.kind}, {"name", e.name}, {"peer", e.peer}, {"bytes", e.bytes},
                           {"step", e.step}, {"ago", e.ago}, {"seconds", e.seconds}});
  return j;
}

RankStall rank_stall_from_json(const json& j) {
  RankStall s;
  s.rank = field<int>(j, "rank");
  s.schedule = field<std::string>(j, "schedule");
  s.fingerprint = number_in_text<uint64_t>(field<std::string>(j, "fingerprint"), "a fingerprint");
  s.step = field<int>(j, "step");
  s.in_step = field<bool>(j, "in_step");
  s.action = field<std::string>(j, "action");
  s.action_seconds = field<double>(j, "action_seconds");
  s.idle_seconds = field<double>(j, "idle_seconds");
  s.sent = counts_from_json(field<json>(j, "sent"));
  s.received = counts_from_json(field<json>(j, "received"));
  const json wait = field<json>(j, "wait");
  if (!wait.is_null())
    s.wait = RankStall::Wait{field<std::string>(wait, "message"), field<int>(wait, "peer"),
                             field<bool>(wait, "receive"), field<int>(wait, "position"),
                             field<double>(wait, "seconds")};
  for (const json& e : field<json>(j, "recent"))
    s.recent.push_back({field<std::string>(e, "kind"), field<std::string>(e, "name"), field<int>(e, "peer"),
                        field<int64_t>(e, "bytes"), field<int>(e, "step"), field<double>(e, "ago"),
                        field<double>(e, "seconds")});
  return s;
}

namespace {

// The ranks' states by rank, and the diagnosis built from them.
class Diagnosis {
 public:
  Diagnosis(const std::vector<RankStall>& states) {
    for (const RankStall& s : states) by_rank_.emplace(s.rank, &s);
  }

  // Ranks grouped by the schedule they run; more than one group is the cause.
  std::optional<StallReport> mismatch() const {
    std::map<uint64_t, std::vector<const RankStall*>> groups;
    for (const auto& [r, s] : by_rank_) groups[s->fingerprint].push_back(s);
    if (groups.size() < 2) return std::nullopt;
    StallReport report;
    report.cause = "schedule_mismatch";
    const uint64_t first = by_rank_.begin()->second->fingerprint;
    std::string runs;
    for (const auto& [fingerprint, ranks] : groups) {
      if (fingerprint != first && report.rank < 0) report.rank = ranks.front()->rank;
      std::string who;
      for (const RankStall* s : ranks) who += concat(who.empty() ? "" : ", ", s->rank);
      runs += concat(runs.empty() ? "" : "; ", ranks.size() > 1 ? "ranks " : "rank ", who,
                     ranks.size() > 1 ? " run " : " runs ",
                     ranks.front()->schedule.empty() ? "?" : ranks.front()->schedule, " (fingerprint ",
                     fingerprint, ")");
    }
    report.headline = concat("the ranks run different schedules: ", runs);
    return report;
  }

  // A wait for a message whose sender has sent it already: in the same step, more messages to the waiting rank
  // than come before it; or in a later step.
  std::optional<StallReport> lost_message() const {
    for (const auto& [r, s] : by_rank_) {
      if (!s->wait || !s->wait->receive) continue;
      const RankStall* sender = state(s->wait->peer);
      if (sender == nullptr) continue;
      const auto sent = sender->sent.find(r);
      const bool sent_this_step =
          sender->step == s->step && sent != sender->sent.end() && sent->second > s->wait->position;
      if (!sent_this_step && sender->step <= s->step) continue;
      StallReport report;
      report.cause = "lost_message";
      report.rank = sender->rank;
      report.action = s->wait->message;
      report.headline = concat("rank ", r, " waits for ", s->wait->message, " from rank ", sender->rank, " for ",
                               seconds(s->wait->seconds), ", but rank ", sender->rank,
                               sent_this_step ? concat(" sent it (its message ", s->wait->position + 1, " of ",
                                                       sent->second, " to rank ", r, " this step)")
                                              : concat(" has gone on to step ", sender->step + 1),
                               ": the message was lost between them");
      return report;
    }
    return std::nullopt;
  }

  // Where the waits lead: a rank that waits on nobody, a rank without a state, or back to a rank on the way.
  std::optional<StallReport> wait_chain() const {
    std::optional<StallReport> best;
    for (const auto& [r, s] : by_rank_) {
      if (!s->wait) continue;
      StallReport report = follow(r);
      if (!best || priority(report.cause) < priority(best->cause)) best = report;
    }
    return best;
  }

  std::optional<StallReport> longest_action() const {
    const RankStall* longest = nullptr;
    for (const auto& [r, s] : by_rank_)
      if (!s->action.empty() && (longest == nullptr || s->action_seconds > longest->action_seconds)) longest = s;
    StallReport report;
    report.cause = "none";
    report.headline = "no rank waits on another";
    if (longest != nullptr)
      report.headline += concat("; the longest action in flight: rank ", longest->rank, " inside ", longest->action,
                                " for ", seconds(longest->action_seconds));
    return report;
  }

 private:
  const RankStall* state(int rank) const {
    auto it = by_rank_.find(rank);
    return it == by_rank_.end() ? nullptr : it->second;
  }

  static int priority(const std::string& cause) {
    static const std::vector<std::string> order = {"inside_action", "no_state", "outside_step", "cycle"};
    return static_cast<int>(std::find(order.begin(), order.end(), cause) - order.begin());
  }

  StallReport follow(int from) const {
    std::vector<int> path = {from};
    std::string waits;
    StallReport report;
    for (;;) {
      const RankStall* s = state(path.back());
      const RankStall::Wait& w = *s->wait;
      waits += concat(waits.empty() ? "" : "; ", "rank ", s->rank, " ", wait_text(w), " (", seconds(w.seconds), ")");
      const int next = w.peer;
      const auto seen = std::find(path.begin(), path.end(), next);
      if (seen != path.end()) {
        report.cause = "cycle";
        report.rank = next;
        report.action = state(next)->wait->message;
        std::string ring;
        for (auto it = seen; it != path.end(); ++it) ring += concat(*it, " -> ");
        report.headline = concat(waits, ": the waits go round (ranks ", ring, next,
                                 "): the ranks disagree on the order of their messages");
        return report;
      }
      const RankStall* t = state(next);
      if (t == nullptr) {
        report.cause = "no_state";
        report.rank = next;
        report.headline = concat(waits, "; rank ", next, " sent no state (stopped, or without stall reports)");
        return report;
      }
      if (!t->wait) {
        report.rank = next;
        if (!t->action.empty()) {
          report.cause = "inside_action";
          report.action = t->action;
          report.headline = concat(waits, "; rank ", next, " is inside ", t->action, " for ", seconds(t->action_seconds));
        } else {
          report.cause = "outside_step";
          report.headline = concat(waits, "; rank ", next, " is between steps (after step ", t->step + 1, ") for ",
                                   seconds(t->idle_seconds));
        }
        return report;
      }
      path.push_back(next);
    }
  }

  std::map<int, const RankStall*> by_rank_;
};

}  // namespace

StallReport diagnose_stall(std::vector<RankStall> states, int world_size) {
  std::sort(states.begin(), states.end(), [](const RankStall& a, const RankStall& b) { return a.rank < b.rank; });
  states.erase(std::unique(states.begin(), states.end(),
                           [](const RankStall& a, const RankStall& b) { return a.rank == b.rank; }),
               states.end());
  const Diagnosis diagnosis(states);
  std::optional<StallReport> chain = diagnosis.wait_chain();
  StallReport report;
  if (auto mismatch = diagnosis.mismatch()) {
    report = *mismatch;
    if (chain) report.headline += concat("; ", chain->headline);
  } else if (auto lost = diagnosis.lost_message()) {
    report = *lost;
  } else {
    report = chain ? *chain : *diagnosis.longest_action();
  }
  std::set<int> present;
  for (const RankStall& s : states) {
    report.lines.push_back(rank_line(s));
    present.insert(s.rank);
  }
  for (int r = 0; r < world_size; ++r)
    if (!present.count(r)) {
      report.missing.push_back(r);
      report.lines.push_back(concat("rank ", r, ": no state"));
    }
  report.ranks = std::move(states);
  return report;
}

std::string StallReport::text() const {
  std::string out = concat("stall report: ", headline, "\n");
  for (const std::string& line : lines) out += concat("  ", line, "\n");
  return out;
}

json StallReport::to_json() const {
  json j = {{"cause", cause}, {"rank", rank}, {"action", action}, {"headline", headline}, {"missing", missing}};
  j["ranks"] = json::array();
  for (const RankStall& s : ranks) j["ranks"].push_back(runtime::to_json(s));
  return j;
}

}  // namespace dualpipe::runtime

#include "dualpipe/trace/kineto_ranks.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "dualpipe/util/error.h"
#include "dualpipe/util/median.h"

namespace dualpipe {

namespace {

// The files: each path, or a directory's *.json files in name order.
std::vector<std::string> trace_files(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code error;
    if (!fs::is_directory(path, error)) {
      files.push_back(path);
      continue;
    }
    // torch.profiler's tensorboard_trace_handler names its files *.pt.trace.json: those, where there are any.
    std::vector<std::string> found, handler;
    for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
      const std::string name = it->path().filename().string();
      if (it->path().extension() == ".json") found.push_back(it->path().string());
      if (name.size() > 14 && name.compare(name.size() - 14, 14, ".pt.trace.json") == 0)
        handler.push_back(it->path().string());
      DUALPIPE_REQUIRE(found.size() <= kMaxKinetoRanks, "profiler traces: directory ", path, " has more than ",
                       kMaxKinetoRanks, " .json files");
    }
    DUALPIPE_REQUIRE(!error, "profiler traces: cannot list directory ", path, ": ", error.message());
    DUALPIPE_REQUIRE(!found.empty(), "profiler traces: directory ", path, " has no .json file");
    if (!handler.empty()) found = std::move(handler);
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  DUALPIPE_REQUIRE(files.size() <= kMaxKinetoRanks, "profiler traces: ", files.size(), " files, above the limit of ",
                   kMaxKinetoRanks);
  // One file given twice (by two names, or a link) would count as two ranks.
  std::map<std::pair<dev_t, ino_t>, const std::string*> seen;
  for (const std::string& file : files) {
    struct stat st;
    if (::stat(file.c_str(), &st) != 0) continue;  // the reader names what is wrong with it
    const auto [it, added] = seen.try_emplace({st.st_dev, st.st_ino}, &file);
    DUALPIPE_REQUIRE(added, "profiler traces '", *it->second, "' and '", file, "' are the same file: give each "
                     "rank's trace once");
  }
  return files;
}

// The process groups' collectives of the trace, where it times them: "gloo:" and "nccl:" operations but the
// point-to-point ones.
std::vector<CollectiveSpan> group_collectives(const KinetoTrace& trace) {
  std::vector<CollectiveSpan> spans;
  for (const KinetoEvent& e : trace.events) {
    if (e.kind != KinetoKind::Communication || e.gpu != trace.has_gpu_kernels) continue;
    const std::size_t colon = e.name.find(':');
    if (colon == std::string::npos || (e.name.compare(0, colon, "gloo") != 0 && e.name.compare(0, colon, "nccl") != 0))
      continue;
    if (e.name.find("send", colon) != std::string::npos || e.name.find("recv", colon) != std::string::npos) continue;
    spans.push_back({e.name, e.start, e.start + e.duration});
  }
  std::stable_sort(spans.begin(), spans.end(),
                   [](const CollectiveSpan& a, const CollectiveSpan& b) { return a.start < b.start; });
  return spans;
}

// The ends of the trace's communication in order of start: its collectives, to match with another rank's. On the
// CPU, Gloo's runs of them where its worker thread is in the trace, else the operators that issued them.
std::vector<double> collective_ends(const KinetoTrace& trace) {
  std::vector<const KinetoEvent*> comm, gloo;
  for (const KinetoEvent& e : trace.events) {
    if (e.kind != KinetoKind::Communication || e.gpu != trace.has_gpu_kernels) continue;
    comm.push_back(&e);
    if (e.name.rfind("gloo:", 0) == 0) gloo.push_back(&e);
  }
  std::vector<const KinetoEvent*>& used = gloo.empty() ? comm : gloo;
  std::stable_sort(used.begin(), used.end(),
                   [](const KinetoEvent* a, const KinetoEvent* b) { return a->start < b->start; });
  std::vector<double> ends;
  for (const KinetoEvent* e : used) ends.push_back(e->start + e->duration);
  return ends;
}

// The median ProfilerStep, or the span of the work.
double step_of(const KinetoTrace& trace, const KinetoSummary& summary) {
  for (const KinetoRegion& r : summary.regions)
    if (r.name == "ProfilerStep") return r.median_duration;
  double first = 0, last = 0;
  bool any = false;
  for (const KinetoEvent& e : trace.events) {
    if (e.kind == KinetoKind::Region || e.kind == KinetoKind::Launch || e.gpu != trace.has_gpu_kernels) continue;
    first = any ? std::min(first, e.start) : e.start;
    last = any ? std::max(last, e.start + e.duration) : e.start + e.duration;
    any = true;
  }
  return last - first;
}

}  // namespace

KinetoRanks read_kineto_ranks(const std::vector<std::string>& paths, const KinetoReadOptions& options) {
  const std::vector<std::string> files = trace_files(paths);
  KinetoRanks out;
  std::vector<std::vector<double>> ends;
  bool every_rank_named = true;
  for (const std::string& file : files) {
    const KinetoTrace trace = read_kineto_trace(file, options);  // one at a time: memory for one trace
    KinetoRankSummary rank;
    rank.source = file;
    rank.rank = trace.rank;
    rank.schedule = trace.schedule;
    rank.schedule_kind = trace.schedule_kind;
    rank.host = trace.host;
    rank.host_cores = trace.host_cores;
    rank.summary = summarize_kineto(trace);
    rank.step = step_of(trace, rank.summary);
    rank.collectives = group_collectives(trace);
    every_rank_named = every_rank_named && trace.rank >= 0;
    out.ranks.push_back(std::move(rank));
    ends.push_back(collective_ends(trace));
  }
  // Ranks as the traces name them, each once; files without distributedInfo: their order.
  std::map<int, std::size_t> by_rank;
  for (std::size_t i = 0; i < out.ranks.size(); ++i) {
    if (!every_rank_named) out.ranks[i].rank = static_cast<int>(i);
    const auto [it, added] = by_rank.try_emplace(out.ranks[i].rank, i);
    DUALPIPE_REQUIRE(added, "profiler traces ", out.ranks[it->second].source, " and ", out.ranks[i].source,
                     " are both of rank ", out.ranks[i].rank, " (distributedInfo.rank): give one trace per rank");
  }
  std::vector<KinetoRankSummary> sorted;
  std::vector<std::vector<double>> sorted_ends;
  for (const auto& [rank, i] : by_rank) {
    sorted.push_back(std::move(out.ranks[i]));
    sorted_ends.push_back(std::move(ends[i]));
  }
  out.ranks = std::move(sorted);
  // Ranks that recorded one host (dualpipe.host) read one clock: nothing to align, and the k-th collectives of two
  // ranks in different groups (two pipeline ranks' data-parallel reductions) do not end together.
  if (std::all_of(out.ranks.begin(), out.ranks.end(),
                  [&](const KinetoRankSummary& r) { return r.host == out.ranks[0].host; }))
    out.host = out.ranks[0].host;
  std::vector<double> steps;
  for (std::size_t i = 0; i < out.ranks.size(); ++i) {
    const std::size_t matched = out.host.empty() ? std::min(sorted_ends[0].size(), sorted_ends[i].size()) : 0;
    std::vector<double> differences;
    for (std::size_t k = 0; k < matched; ++k) differences.push_back(sorted_ends[0][k] - sorted_ends[i][k]);
    out.ranks[i].clock_offset = median(differences);
    out.ranks[i].collectives_matched = static_cast<int>(matched);
    steps.push_back(out.ranks[i].step);
    if (out.ranks[i].step > out.ranks[out.slowest].step) out.slowest = i;
  }
  out.median_step = median(steps);
  return out;
}

}  // namespace dualpipe

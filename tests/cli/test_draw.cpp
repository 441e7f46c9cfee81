// `dualpipe draw` end to end: the files it writes and the errors it gives. Runs the binary the build names
// in DUALPIPE_BIN (or the environment variable of that name).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dualpipe/sim/simulate.h"
#include "dualpipe/sim/trace_costs.h"
#include "dualpipe/trace/trace.h"
#include "viz/picture_support.h"

namespace dualpipe::test {
namespace {

struct CommandResult {
  int status = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class DrawCommand : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef DUALPIPE_BIN
    const char* bin = DUALPIPE_BIN;
#else
    const char* bin = std::getenv("DUALPIPE_BIN");
#endif
    if (!bin || !std::ifstream(bin)) GTEST_SKIP() << "no built dualpipe binary (DUALPIPE_BIN)";
    bin_ = bin;
    std::string pattern = ::testing::TempDir() + "dualpipe_draw_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << "cannot make a scratch directory under " << ::testing::TempDir();
    dir_ = pattern + "/";
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  CommandResult draw(const std::string& args) {
    const std::string out = dir_ + "stdout", err = dir_ + "stderr";
    CommandResult r;
    const int raw = std::system((bin_ + " draw " + args + " >" + out + " 2>" + err).c_str());
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }
  std::string path(const std::string& name) const { return dir_ + name; }

  std::string bin_, dir_;
};

TEST_F(DrawCommand, WritesOneCellPerActionOfTheSchedule) {
  const CommandResult r = draw("--kind dualpipe --ranks 8 --microbatches 20 -o " + path("d.svg"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto root = XmlReader::parse(slurp(path("d.svg")));
  const Schedule s = make_schedule("dualpipe", ScheduleOptions{8, 20});
  EXPECT_EQ(drawn_cells(*root).size(), s.num_actions());
  const std::string text = root->all_text();
  for (const char* word : {"dualpipe, 8 ranks, 20 micro-batches", "largest idle 6,", "span rate", "peak activations 9",
                           "costs F=1,B=2,W=1,FB=3,comm=0"}) {
    EXPECT_TRUE(contains(text, word)) << word;
  }
}

// ZeRO-3 over 2 replicas: 1F1B R=4 M=8 takes 33 with F=1, B=2 (3(R-1) + 3M); each rank first gathers its stage
// (1.5) and at the end reduces its gradients (2), and rank 0, which computes first and last, waits for both: 36.5.
TEST_F(DrawCommand, AZeroThreeScheduleShowsItsGathersAndReductions) {
  const CommandResult r = draw("--kind 1f1b --ranks 4 --microbatches 8 --dp 2 --zero 3 "
                               "--cost F=1,B=2,W=1,unshard=1.5,reduce=2 -o " + path("z.svg"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto root = XmlReader::parse(slurp(path("z.svg")));
  EXPECT_EQ(drawn_cells(*root).size(), 4u * 8 * 2);  // the compute cells as before
  std::vector<const XmlElement*> strips;
  root->collect([](const XmlElement& e) { return e.name == "g" && e.has_class("span"); }, strips);
  int gathers = 0, reductions = 0;  // told apart by their lengths, the costs given
  for (const XmlElement* g : strips) {
    EXPECT_EQ(g->attr("data-track"), "2");
    const double length = g->number("data-end") - g->number("data-start");
    EXPECT_TRUE(length == 1.5 || length == 2) << length;
    ++(length == 1.5 ? gathers : reductions);
  }
  EXPECT_EQ(gathers, 4);
  EXPECT_EQ(reductions, 4);
  const std::string text = root->all_text();
  for (const char* word : {"step time 36.5,", "data-parallel UNSHARD / REDUCE_GRAD in flight"})
    EXPECT_TRUE(contains(text, word)) << word;
  // Nothing to gather without replicas.
  const CommandResult one = draw("--kind 1f1b --zero 3 -o " + path("one.svg"));
  EXPECT_EQ(one.status, 2);
  EXPECT_TRUE(contains(one.err, "ZeRO-3 shards over the data-parallel replicas and needs at least 2, got 1"))
      << one.err;
}

TEST_F(DrawCommand, HtmlHasTooltips) {
  const CommandResult r = draw("--kind 1f1b --ranks 4 --microbatches 8 --cost F=1,B=2 -o " + path("p.html"));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string html = slurp(path("p.html"));
  EXPECT_TRUE(contains(html, "<title>0F0: forward, stage 0, micro-batch 0\nstart 0\nend 1\nduration 1</title>"));
}

TEST_F(DrawCommand, CompareStacksSchedulesAndNotesSkippedOnes) {
  // M = 6 with R = 4: DualPipe (M >= 2R) and the M % R schedules cannot serve it.
  const CommandResult r = draw("--compare all --ranks 4 --microbatches 6 -o " + path("c.svg"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto root = XmlReader::parse(slurp(path("c.svg")));
  const std::string text = root->all_text();
  EXPECT_TRUE(contains(text, "skipped: dualpipe (")) << text.substr(0, 2000);
  EXPECT_TRUE(contains(r.err, "skipped dualpipe"));
  std::vector<const XmlElement*> panels;
  root->collect([](const XmlElement& e) { return e.name == "g" && e.has_class("timeline"); }, panels);
  EXPECT_GE(panels.size(), 3u);
  EXPECT_TRUE(contains(text, "schedules compared: 4 ranks, 6 micro-batches"));

  const CommandResult named = draw("--compare gpipe,dualpipe --ranks 4 --microbatches 6 -o " + path("c2.svg"));
  EXPECT_EQ(named.status, 2);
  EXPECT_TRUE(contains(named.err, "--compare: dualpipe")) << named.err;
}

TEST_F(DrawCommand, DrawsATraceWithItsPlan) {
  const CostModel costs = CostModel::parse("F=1,B=2,W=1,FB=2.5");
  const Schedule s = make_schedule("dualpipev", ScheduleOptions{4, 8});
  Trace trace = trace_from_simulation(s, simulate(s, costs), 250);
  for (TraceEvent& e : trace.events) {  // a uniformly slower run than planned (actions of a rank still in turn)
    e.start *= 1.1;
    e.duration *= 1.1;
  }
  write_trace_file(path("run.json"), trace);
  const CommandResult r = draw("--trace " + path("run.json") + " --with-plan -o " + path("t.svg"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto root = XmlReader::parse(slurp(path("t.svg")));
  const std::vector<DrawnCell> cells = drawn_cells(*root);
  EXPECT_EQ(cells.size(), 2 * s.num_actions()) << "measured and planned";
  EXPECT_EQ(root->attr("data-time-unit"), "us");
  const std::string text = root->all_text();
  EXPECT_TRUE(contains(text, "measured: dualpipev")) << text.substr(0, 600);
  EXPECT_TRUE(contains(text, "plan: dualpipev"));
  EXPECT_TRUE(contains(text, "vs planned"));
  // Same scale: a measured cell and its planned twin have widths in the ratio of their durations.
  const DrawnCell* measured = nullptr;
  const DrawnCell* planned = nullptr;
  for (const DrawnCell& c : cells) {
    if (c.rank == 0 && c.index == 0) (c.timeline == 0 ? measured : planned) = &c;
  }
  ASSERT_TRUE(measured && planned);
  EXPECT_NEAR(measured->width / planned->width,
              (measured->end - measured->start) / (planned->end - planned->start), 0.01);
}

TEST_F(DrawCommand, ClearErrors) {
  CommandResult r = draw("--kind dualpipe -o " + path("x.png"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "must end in .svg or .html")) << r.err;
  r = draw("--kind dualpipe --ranks 5 -o " + path("x.svg"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "5")) << r.err;
  EXPECT_FALSE(std::ifstream(path("x.svg"))) << "nothing written on error";
  r = draw("--with-plan -o " + path("x.svg"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "--trace")) << r.err;
  r = draw("--trace " + path("missing.json") + " -o " + path("x.svg"));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "missing.json")) << r.err;
}

TEST_F(DrawCommand, WithoutOutputWritesTimelineSvgLikePlotWritesRunSvg) {
  const int raw = std::system(("cd " + dir_ + " && " + bin_ + " draw --kind gpipe >stdout 2>&1").c_str());
  EXPECT_EQ(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 0) << slurp(dir_ + "stdout");
  EXPECT_TRUE(contains(slurp(dir_ + "stdout"), "wrote timeline.svg")) << slurp(dir_ + "stdout");
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_ + "timeline.svg"));
}

}  // namespace
}  // namespace dualpipe::test

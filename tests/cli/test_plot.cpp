// `dualpipe plot` end to end on hand-written metrics files: the picture it writes, the line it prints, and for a
// bad file exit status 2, the line named and no picture left behind.
#include <gtest/gtest.h>

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/run_command.h"
#include "test_helpers.h"
#include "viz/xml_reader.h"

namespace dualpipe::test {
namespace {

// Three steps and two evaluations; the last loss is 3.5, the baseline 3.91.
const char* const kRun =
    R"({"type":"config","schedule":"1f1b","ranks":2,"unigram_baseline":3.91}
{"type":"eval","step":0,"val_loss":5.5}
{"type":"step","step":1,"loss":4.1,"tokens_per_s":1234.5,"step_ms":210.2,"lr":0.001,"grad_norm":1.3,"peak_activation_bytes":[1,2]}
{"type":"step","step":2,"loss":3.75,"tokens_per_s":1300,"step_ms":200,"lr":0.001,"grad_norm":1.1,"peak_activation_bytes":[1,2]}
{"type":"step","step":3,"loss":3.5,"tokens_per_s":1250,"step_ms":205,"lr":0.001,"grad_norm":1.0,"peak_activation_bytes":[1,2]}
{"type":"eval","step":3,"val_loss":3.75}
)";

class PlotCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "dualpipe_plot_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern + "/";
  }
  void TearDown() override {
    for (const std::string& name : files()) std::remove((dir_ + name).c_str());
    ::rmdir(dir_.c_str());
  }

  std::string write(const std::string& name, const std::string& contents) const {
    std::ofstream(dir_ + name, std::ios::binary) << contents;
    return dir_ + name;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(dir_ + name);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  bool exists(const std::string& name) const { return static_cast<bool>(std::ifstream(dir_ + name)); }
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(dir_.c_str())) {
      while (const dirent* e = ::readdir(d))
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.emplace_back(e->d_name);
      ::closedir(d);
    }
    return names;
  }
  CommandResult plot(const std::string& args) const {
    return run_command("cd '" + dir_ + "' && " + DUALPIPE_BIN + " plot " + args);
  }

  std::string dir_;
};

std::size_t point_count(const XmlElement& root, const std::string& series) {
  std::vector<const XmlElement*> found;
  root.collect([&](const XmlElement& e) { return e.name == "polyline" && e.has("data-series") &&
                                                 e.attr("data-series") == series; },
               found);
  if (found.size() != 1) return 0;
  std::istringstream in(found[0]->attr("points"));
  std::size_t n = 0;
  for (std::string pair; in >> pair;) ++n;
  return n;
}

TEST_F(PlotCommand, DrawsTheRunAndSaysWhatItWrote) {
  write("run.jsonl", kRun);
  const CommandResult r = plot("--metrics run.jsonl -o picture.svg");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "wrote picture.svg (3 steps, 2 evaluations): final loss 3.5000 at step 3 vs unigram baseline "
                   "3.9100 (-0.4100)\n");
  const auto root = XmlReader::parse(read("picture.svg"));
  EXPECT_EQ(root->attr("width"), "900");
  EXPECT_EQ(point_count(*root, "loss"), 3u);
  EXPECT_EQ(point_count(*root, "tokens_per_s"), 3u);
  EXPECT_EQ(point_count(*root, "val_loss"), 2u);
  EXPECT_TRUE(contains(root->all_text(), "unigram baseline 3.91"));
  EXPECT_TRUE(contains(root->all_text(), "1f1b, 2 ranks"));
  EXPECT_EQ(files().size(), 2u) << "no temporary file left";
}

TEST_F(PlotCommand, DefaultOutputAndWidth) {
  write("run.jsonl", std::string(R"({"type":"step","step":5,"loss":2.25,"tokens_per_s":10})") + "\n");
  const CommandResult r = plot("--metrics run.jsonl --width 1200");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "wrote run.svg (1 step, 0 evaluations): final loss 2.2500 at step 5 (no unigram baseline in "
                   "the file)\n");
  EXPECT_EQ(XmlReader::parse(read("run.svg"))->attr("width"), "1200");
}

TEST_F(PlotCommand, BadFileNamesTheLineAndWritesNothing) {
  // Line 4 has a loss that is not a number.
  std::string bad = kRun;
  const std::size_t at = bad.find("\"loss\":3.75");
  bad.replace(at, 11, "\"loss\":\"3.75\"");
  write("bad.jsonl", bad);
  const CommandResult r = plot("--metrics bad.jsonl -o out.svg");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.out, "dualpipe: metrics 'bad.jsonl' line 4: field 'loss': expected a number, got \"3.75\"\n");
  EXPECT_FALSE(exists("out.svg"));
  EXPECT_EQ(files().size(), 1u) << "nothing written, not even a temporary file";

  // A broken line in the middle, and an existing picture is left as it was.
  write("out.svg", "old");
  write("broken.jsonl", std::string(kRun).insert(std::string(kRun).find("{\"type\":\"step\",\"step\":2"), "{oops\n"));
  const CommandResult broken = plot("--metrics broken.jsonl -o out.svg");
  EXPECT_EQ(broken.status, 2) << broken.out;
  EXPECT_TRUE(contains(broken.out, "metrics 'broken.jsonl' line 4: not valid JSON")) << broken.out;
  EXPECT_EQ(read("out.svg"), "old");
}

TEST_F(PlotCommand, BadOptionsAreRefusedBeforeReading) {
  write("run.jsonl", kRun);
  const Refusal cases[] = {
      {"--metrics run.jsonl --width 100000", "--width must be from 600 to 4000 pixels, got 100000"},
      {"--metrics run.jsonl -o run.png", "output 'run.png': plot writes SVG, so the file name must end in .svg"},
      {"-o x.svg", "--metrics is required"},
      {"--metrics nothing.jsonl", "metrics 'nothing.jsonl' does not exist"},
  };
  for (const Refusal& c : cases) EXPECT_REFUSED(plot(c.args), c.says);
  EXPECT_FALSE(exists("run.svg"));
  EXPECT_FALSE(exists("x.svg"));
}

TEST_F(PlotCommand, HelpHasAnExample) {
  const CommandResult r = plot("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(contains(r.out, "dualpipe plot --metrics run.jsonl -o run.svg")) << r.out;
  EXPECT_TRUE(contains(r.out, "--width")) << r.out;
}

}  // namespace
}  // namespace dualpipe::test

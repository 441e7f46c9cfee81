// The program in docs/runtime.md: it is examples/minimal_dualpipe.cpp verbatim, and it runs.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(MinimalExample, DocsShowTheCompiledProgram) {
  std::string example = read(std::string(DUALPIPE_SOURCE_DIR) + "/examples/minimal_dualpipe.cpp");
  std::string doc = read(std::string(DUALPIPE_SOURCE_DIR) + "/docs/runtime.md");
  ASSERT_FALSE(example.empty());
  EXPECT_NE(doc.find(example), std::string::npos) << "docs/runtime.md must embed examples/minimal_dualpipe.cpp";
}

TEST(MinimalExample, RunsOneStepOnTwoThreads) {
  std::string command = std::string("env -u RANK ") + DUALPIPE_MINIMAL_EXAMPLE + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  int status = ::pclose(pipe);
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("micro-batch 3 loss"), std::string::npos) << output;
}

}  // namespace

// The published figures the layout planner is checked and fitted on (tests/layout/data/published_runs.json, each
// with its source).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace dualpipe::test {

// The entry `key` of the file ("narayanan2021", "zero2020", ...).
inline nlohmann::json published_figures(const std::string& key) {
  std::ifstream in(std::string(DUALPIPE_SOURCE_DIR) + "/tests/layout/data/published_runs.json");
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str()).at(key);
}

}  // namespace dualpipe::test

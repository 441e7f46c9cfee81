// libFuzzer target: the stall states ranks share (rank_stall_from_json, a JSON array of them as rank 0 gathers it),
// then the diagnosis and both forms of the report, which rank 0 prints and writes from whatever arrived.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dualpipe/runtime/stall_report.h"
#include "dualpipe/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dualpipe::runtime;
  const nlohmann::json states = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (!states.is_array()) return 0;
  std::vector<RankStall> read;
  for (const nlohmann::json& state : states) {
    try {
      read.push_back(rank_stall_from_json(state));
    } catch (const dualpipe::Error&) {
    }
  }
  try {
    const StallReport report = diagnose_stall(read, static_cast<int>(states.size()) + 1);
    (void)report.text();
    (void)report.to_json().dump();
  } catch (const dualpipe::Error&) {
  }
  return 0;
}

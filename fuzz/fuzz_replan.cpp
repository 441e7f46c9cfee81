// libFuzzer target: the re-plan request (parse_replan_request), from which the launcher restarts every rank.
#include <cstdint>
#include <string>

#include "dualpipe/run/replan.h"
#include "dualpipe/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)dualpipe::run::parse_replan_request(std::string(reinterpret_cast<const char*>(data), size),
                                              "fuzz/replan.json");
  } catch (const dualpipe::Error&) {
  }
  return 0;
}

// libFuzzer target: the --cost parser (CostModel::parse) and its check.
#include <cstdint>
#include <string>

#include "dualpipe/sim/cost_model.h"
#include "dualpipe/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const dualpipe::CostModel c = dualpipe::CostModel::parse(text);
    c.check();
    (void)c.to_string();
  } catch (const dualpipe::Error&) {
  }
  return 0;
}

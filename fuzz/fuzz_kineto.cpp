// libFuzzer target: the PyTorch profiler trace reader (parse_kineto_trace), then what `dualpipe profile` does with
// an accepted trace: the regions' split into compute, communication and overlap, and the costs of its regions.
#include <cstdint>
#include <string_view>

#include "dualpipe/sim/kineto_costs.h"
#include "dualpipe/trace/kineto.h"
#include "dualpipe/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const dualpipe::KinetoSummary summary = dualpipe::summarize_kineto(dualpipe::parse_kineto_trace(text, "fuzz.json"));
    (void)dualpipe::costs_from_kineto(summary, dualpipe::KinetoCostNames{});
  } catch (const dualpipe::Error&) {
  }
  return 0;
}

// libFuzzer target: PyTorch's compute-only CSV reader (parse_pytorch_csv), then the validator on what it accepts.
#include <cstdint>
#include <string_view>

#include "dualpipe/schedule/pytorch_csv.h"
#include "dualpipe/schedule/validate.h"
#include "dualpipe/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const dualpipe::Schedule s = dualpipe::parse_pytorch_csv(text);
    (void)dualpipe::find_problems(s);
    (void)dualpipe::format_pytorch_csv(s);
  } catch (const dualpipe::Error&) {
  }
  return 0;
}

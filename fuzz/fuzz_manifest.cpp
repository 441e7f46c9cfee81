// libFuzzer target: the checkpoint manifest reader (parse_manifest), whose numbers a resume trusts once read.
#include <cstdint>
#include <string>

#include "dualpipe/train/checkpoint.h"
#include "dualpipe/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const dualpipe::train::CheckpointManifest m = dualpipe::train::parse_manifest(text, "fuzz/manifest.json");
    dualpipe::train::check_identity("fuzz", m.identity, m.identity);
  } catch (const dualpipe::Error&) {
  }
  return 0;
}

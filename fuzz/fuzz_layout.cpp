// libFuzzer target: `dualpipe layout`'s inputs. The input is a model JSON, a line "---", a cluster JSON, a line
// "---", then a line "GLOBAL_BATCH FIX" (FIX as --fix takes it, may be empty). Runs what the command runs: the
// two readers, LayoutFix::parse, the search (its schedule memory limited to 16 MiB, so that a search stays short
// under the sanitizers: the limit is the search's own rule, only lower) and both reports.
#include <cstdint>
#include <sstream>
#include <string>

#include "dualpipe/layout/layout.h"
#include "dualpipe/layout/layout_report.h"
#include "dualpipe/util/error.h"

namespace {

// The part of `text` before the next "\n---\n" (or the rest), advancing `at` past the separator.
std::string next_part(const std::string& text, std::size_t& at) {
  const std::size_t end = text.find("\n---\n", at);
  std::string part = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
  at = end == std::string::npos ? text.size() : end + 5;
  return part;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dualpipe::layout;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::size_t at = 0;
  const std::string model = next_part(text, at), cluster = next_part(text, at);
  std::istringstream request_line(next_part(text, at));
  try {
    LayoutRequest request;
    request.model = parse_model_spec(model, "fuzz/model.json");
    request.cluster = parse_cluster_spec(cluster, "fuzz/cluster.json");
    std::string fix;
    if (!(request_line >> request.global_batch)) return 0;
    request_line >> fix;
    request.fix = LayoutFix::parse(fix);
    request.top = 1;  // the fewest simulations the bound allows (a shared-cores simulation is dear under ASan)
    request.max_memory_bytes = std::int64_t{16} << 20;
    const LayoutSearch search = search_layouts(request);
    (void)layout_table(request, search, nullptr);
    (void)layout_json(request, search, nullptr);
  } catch (const dualpipe::Error&) {
  }
  return 0;
}

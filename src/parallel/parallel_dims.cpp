// The parallel sizes' rules (see parallel_dims.h).
#include "dualpipe/parallel/parallel_dims.h"

#include "dualpipe/util/error.h"

namespace dualpipe::parallel {
namespace {

constexpr const char* kSameExperts = ": each rank of an expert-parallel group holds the same number of experts";

// "--ep 4" or "ep=4".
std::string named(const char* size, int64_t value, DimsSpelling spelling) {
  return spelling == DimsSpelling::Options ? detail::concat("--", size, " ", value) : detail::concat(size, "=", value);
}

}  // namespace

std::string world_product(const ParallelDims& d, DimsSpelling spelling) {
  return named("pp", d.pp, spelling) + " x " + named("dp", d.dp, spelling) +
         (d.cp > 1 ? " x " + named("cp", d.cp, spelling) : "") + (d.tp > 1 ? " x " + named("tp", d.tp, spelling) : "");
}

std::string ParallelDims::to_string() const {
  return detail::concat("PP=", pp, " x DP=", dp, cp > 1 ? detail::concat(" x CP=", cp) : std::string(),
                        tp > 1 ? detail::concat(" x TP=", tp) : std::string(),
                        ep > 1 ? detail::concat(" (EP=", ep, ")") : std::string());
}

std::string broken_rule(const ParallelDims& d, DimsSpelling spelling) {
  const std::pair<const char*, int> sizes[] = {{"pp", d.pp}, {"dp", d.dp}, {"ep", d.ep}, {"tp", d.tp}, {"cp", d.cp}};
  for (const auto& [size, value] : sizes)
    if (value < 1)
      return detail::concat(spelling == DimsSpelling::Options ? "--" : "", size, " must be at least 1, got ", value);
  if (d.dp % d.ep != 0)
    return detail::concat(named("ep", d.ep, spelling), " must divide ", named("dp", d.dp, spelling),
                          ": expert parallelism runs across the data-parallel replicas of a stage");
  return "";
}

std::string broken_rule(const ParallelDims& d, int64_t experts, DimsSpelling spelling) {
  if (std::string broken = broken_rule(d, spelling); !broken.empty()) return broken;
  const bool options = spelling == DimsSpelling::Options;
  if (experts <= 0 && d.ep > 1)
    return named("ep", d.ep, spelling) + (options ? " needs an MoE model: give --experts N" : ": the model has no experts");
  if (experts > 0 && experts % d.ep != 0)
    return options ? detail::concat("--experts ", experts, " must be divisible by --ep ", d.ep, kSameExperts)
                   : detail::concat("ep=", d.ep, " must divide the model's ", experts, " experts", kSameExperts);
  return "";
}

void check_world_size(const ParallelDims& d, int64_t limit, DimsSpelling spelling) {
  DUALPIPE_REQUIRE(d.world_size() <= limit, world_product(d, spelling), " is ", d.world_size(),
                   " ranks, above the limit of ", limit);
}

void check(const ParallelDims& dims, DimsSpelling spelling) {
  const std::string broken = broken_rule(dims, spelling);
  DUALPIPE_REQUIRE(broken.empty(), broken);
}

void check(const ParallelDims& dims, int64_t experts, DimsSpelling spelling) {
  const std::string broken = broken_rule(dims, experts, spelling);
  DUALPIPE_REQUIRE(broken.empty(), broken);
}

}  // namespace dualpipe::parallel

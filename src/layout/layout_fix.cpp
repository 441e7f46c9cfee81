// --fix: the sizes a layout search is held to, read from KEY=VALUE items, checked for values that cannot hold
// together, and matched against every row (layout.h).
#include <algorithm>

#include "dualpipe/layout/layout.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/util/error.h"

namespace dualpipe::layout {

namespace {
constexpr const char* kFixKeys =
    "tp, cp, pp, vpp, dp, ep, zero, mbs, recompute, schedule, sp, dp_overlap, flash, even_stages";
}  // namespace

LayoutFix LayoutFix::parse(const std::string& text) {
  LayoutFix fix;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t eq = item.find('=');
    DUALPIPE_REQUIRE(eq != std::string::npos && eq > 0 && eq + 1 < item.size(), "--fix item '", item,
                     "' must be KEY=VALUE (keys: ", kFixKeys, ")");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    const auto number = [&](std::optional<int>& slot, int low, int high) {
      DUALPIPE_REQUIRE(!slot, "--fix names '", key, "' twice");
      DUALPIPE_REQUIRE(value.find_first_not_of("0123456789") == std::string::npos && value.size() <= 7,
                       "--fix ", key, "='", value, "' must be a whole number");
      const int n = std::stoi(value);
      DUALPIPE_REQUIRE(n >= low && n <= high, "--fix ", key, "=", n, " must be between ", low, " and ", high);
      slot = n;
    };
    const auto flag = [&](std::optional<bool>& slot) {
      DUALPIPE_REQUIRE(!slot, "--fix names '", key, "' twice");
      DUALPIPE_REQUIRE(value == "0" || value == "1", "--fix ", key, "='", value, "' must be 0 or 1");
      slot = value == "1";
    };
    if (key == "tp") number(fix.tp, 1, 1 << 20);
    else if (key == "cp") number(fix.cp, 1, 1 << 20);
    else if (key == "pp") number(fix.pp, 1, 1 << 20);
    else if (key == "vpp") number(fix.vpp, 1, 64);
    else if (key == "dp") number(fix.dp, 1, 1 << 20);
    else if (key == "ep") number(fix.ep, 1, 1 << 20);
    else if (key == "zero") number(fix.zero, 0, 3);
    else if (key == "mbs") number(fix.mbs, 1, 1 << 16);
    else if (key == "recompute") {
      DUALPIPE_REQUIRE(!fix.recompute, "--fix names 'recompute' twice");
      fix.recompute = parse_recompute(value);
    } else if (key == "schedule") {
      DUALPIPE_REQUIRE(fix.schedules.empty(), "--fix names 'schedule' twice (join several with '+')");
      for (size_t begin = 0;;) {
        const size_t plus = std::min(value.find('+', begin), value.size());
        const std::string kind = value.substr(begin, plus - begin);
        DUALPIPE_REQUIRE(kind == "none" || find_generator(kind), "--fix schedule='", kind,
                         "' is not a schedule (dualpipe schedule --help lists them) nor none");
        const std::string name = kind == "none" ? kind : std::string(find_generator(kind)->name);
        DUALPIPE_REQUIRE(std::find(fix.schedules.begin(), fix.schedules.end(), name) == fix.schedules.end(),
                         "--fix schedule names '", name, "' twice");
        fix.schedules.push_back(name);
        if (plus == value.size()) break;
        begin = plus + 1;
      }
    } else if (key == "sp") {
      flag(fix.sp);
    } else if (key == "dp_overlap") {
      flag(fix.dp_overlap);
    } else if (key == "flash") {
      flag(fix.flash);
    } else if (key == "even_stages") {
      flag(fix.even_stages);
    } else {
      throw InvalidArgument("--fix key '" + key + "' is not one of " + kFixKeys);
    }
    start = comma + 1;
    if (comma == text.size()) break;
  }
  return fix;
}

std::string LayoutFix::to_string() const {
  std::string text;
  const auto add = [&](const char* key, const std::string& value) {
    text += (text.empty() ? "" : ",") + std::string(key) + "=" + value;
  };
  const auto number = [&](const char* key, const std::optional<int>& value) {
    if (value) add(key, std::to_string(*value));
  };
  number("tp", tp), number("cp", cp), number("pp", pp), number("vpp", vpp), number("dp", dp), number("ep", ep);
  number("zero", zero), number("mbs", mbs);
  if (recompute) add("recompute", recompute_name(*recompute));
  if (!schedules.empty()) {
    std::string joined;
    for (const std::string& kind : schedules) joined += (joined.empty() ? "" : "+") + kind;
    add("schedule", joined);
  }
  const auto flag = [&](const char* key, const std::optional<bool>& value) {
    if (value) add(key, *value ? "1" : "0");
  };
  flag("sp", sp), flag("dp_overlap", dp_overlap), flag("flash", flash), flag("even_stages", even_stages);
  return text;
}

bool LayoutFix::allows_schedule(const std::string& kind) const {
  return schedules.empty() || std::find(schedules.begin(), schedules.end(), kind) != schedules.end();
}

bool LayoutFix::cuts_as_required(const ModelSpec& model, const Layout& l) const {
  return !even_stages.value_or(false) || model.layers % l.stages() == 0;
}

void LayoutFix::apply(Layout& l) const {
  l.sequence_parallel = sp.value_or(true), l.dp_overlap = dp_overlap.value_or(true);
  l.flash_attention = flash.value_or(true);
}

bool LayoutFix::holds(const Layout& l) const {
  const auto same = [](const auto& fixed, const auto& value) { return !fixed || *fixed == value; };
  // A planned schedule ("planned auto V") is no family's: it holds only when no schedule is fixed.
  return same(tp, l.tp) && same(cp, l.cp) && same(pp, l.pp) && same(vpp, l.vpp) && same(dp, l.dp) &&
         same(ep, l.ep) && same(zero, l.zero) && same(mbs, l.micro_batch_size) && same(recompute, l.recompute) &&
         allows_schedule(l.schedule) && same(sp, l.sequence_parallel) && same(dp_overlap, l.dp_overlap) &&
         same(flash, l.flash_attention);
}

void LayoutFix::check_can_hold(const ModelSpec& model) const {
  const std::string given = "--fix " + to_string();
  if (ep && *ep > 1) {
    DUALPIPE_REQUIRE(model.experts > 0, given, ": ep=", *ep, " needs a model with experts; ", model.name,
                     " is dense");
    DUALPIPE_REQUIRE(model.experts % *ep == 0, given, ": ep=", *ep, " must divide the model's ", model.experts,
                     " experts");
  }
  if (ep && dp) {  // the trainer's rule between them (parallel_dims.h)
    parallel::ParallelDims dims;
    dims.ep = *ep, dims.dp = *dp;
    const std::string broken = parallel::broken_rule(dims, parallel::DimsSpelling::Fix);
    DUALPIPE_REQUIRE(broken.empty(), given, ": ", broken);
  }
  if (schedules.size() == 1 && schedules[0] == "none") {
    DUALPIPE_REQUIRE(!pp || *pp == 1, given, ": schedule=none is a pipeline of one stage, so pp must be 1");
    DUALPIPE_REQUIRE(!vpp || *vpp == 1, given, ": schedule=none is one stage per rank, so vpp must be 1");
  } else if (!schedules.empty()) {
    if (!allows_schedule("none"))
      DUALPIPE_REQUIRE(!pp || *pp > 1, given, ": a schedule needs a pipeline, so pp must be above 1");
    if (vpp) {
      bool served = false;
      for (const std::string& kind : schedules) {
        const GeneratorInfo* generator = find_generator(kind);
        served |= generator ? generator->stages_per_rank == 0 || generator->stages_per_rank == *vpp : *vpp == 1;
      }
      const GeneratorInfo* first = find_generator(schedules[0]);
      DUALPIPE_REQUIRE(served, given, ": ",
                       schedules.size() == 1 && first
                           ? detail::concat(schedules[0], " runs ", first->stages_per_rank, " stage",
                                            first->stages_per_rank == 1 ? "" : "s", " per rank")
                           : std::string("none of these schedules runs that many stages per rank"),
                       ", not vpp=", *vpp);
    }
  }
  if (vpp && *vpp > 1) {
    bool served = false;
    for (const GeneratorInfo& g : generators()) served |= g.stages_per_rank == 0 || g.stages_per_rank == *vpp;
    DUALPIPE_REQUIRE(served, given, ": no schedule runs vpp=", *vpp, " stages per rank");
    DUALPIPE_REQUIRE(!pp || *pp > 1, given, ": vpp=", *vpp, " needs a pipeline, so pp must be above 1");
  }
}

}  // namespace dualpipe::layout

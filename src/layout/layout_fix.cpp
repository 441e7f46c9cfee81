// --fix: the sizes a layout search is held to, read from KEY=VALUE items, checked for values that cannot hold
// together, and matched against every row (layout.h).
#include <algorithm>

#include "dualpipe/layout/layout.h"
#include "dualpipe/schedule/generators.h"
#include "dualpipe/util/error.h"

namespace dualpipe::layout {

LayoutFix LayoutFix::parse(const std::string& text) {
  LayoutFix fix;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t eq = item.find('=');
    DUALPIPE_REQUIRE(eq != std::string::npos && eq > 0 && eq + 1 < item.size(), "--fix item '", item,
                     "' must be KEY=VALUE (keys: tp, cp, pp, vpp, dp, ep, zero, mbs, recompute, schedule)");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    const auto number = [&](std::optional<int>& slot, int low, int high) {
      DUALPIPE_REQUIRE(!slot, "--fix names '", key, "' twice");
      DUALPIPE_REQUIRE(value.find_first_not_of("0123456789") == std::string::npos && value.size() <= 7,
                       "--fix ", key, "='", value, "' must be a whole number");
      const int n = std::stoi(value);
      DUALPIPE_REQUIRE(n >= low && n <= high, "--fix ", key, "=", n, " must be between ", low, " and ", high);
      slot = n;
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
      DUALPIPE_REQUIRE(!fix.schedule, "--fix names 'schedule' twice");
      DUALPIPE_REQUIRE(value == "none" || find_generator(value), "--fix schedule='", value,
                       "' is not a schedule (dualpipe schedule --help lists them) nor none");
      fix.schedule = value == "none" ? value : std::string(find_generator(value)->name);
    } else {
      throw InvalidArgument("--fix key '" + key + "' is not one of tp, cp, pp, vpp, dp, ep, zero, mbs, recompute, schedule");
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
  if (schedule) add("schedule", *schedule);
  return text;
}

bool LayoutFix::holds(const Layout& l) const {
  const auto same = [](const auto& fixed, const auto& value) { return !fixed || *fixed == value; };
  // A planned schedule ("planned auto V") is no family's: it holds only when no schedule is fixed.
  return same(tp, l.tp) && same(cp, l.cp) && same(pp, l.pp) && same(vpp, l.vpp) && same(dp, l.dp) &&
         same(ep, l.ep) && same(zero, l.zero) && same(mbs, l.micro_batch_size) && same(recompute, l.recompute) &&
         same(schedule, l.schedule);
}

void LayoutFix::check_can_hold(const ModelSpec& model) const {
  const std::string given = "--fix " + to_string();
  if (ep && *ep > 1) {
    DUALPIPE_REQUIRE(model.experts > 0, given, ": ep=", *ep, " needs a model with experts; ", model.name,
                     " is dense");
    DUALPIPE_REQUIRE(model.experts % *ep == 0, given, ": ep=", *ep, " must divide the model's ", model.experts,
                     " experts");
  }
  if (schedule == "none") {
    DUALPIPE_REQUIRE(!pp || *pp == 1, given, ": schedule=none is a pipeline of one stage, so pp must be 1");
    DUALPIPE_REQUIRE(!vpp || *vpp == 1, given, ": schedule=none is one stage per rank, so vpp must be 1");
  } else if (schedule) {
    DUALPIPE_REQUIRE(!pp || *pp > 1, given, ": a schedule needs a pipeline, so pp must be above 1");
    const GeneratorInfo& generator = *find_generator(*schedule);
    DUALPIPE_REQUIRE(!vpp || generator.stages_per_rank == 0 || *vpp == generator.stages_per_rank, given, ": ",
                     *schedule, " runs ", generator.stages_per_rank, " stage", generator.stages_per_rank == 1 ? "" : "s",
                     " per rank, not vpp=", *vpp);
  }
  if (vpp && *vpp > 1) {
    bool served = false;
    for (const GeneratorInfo& g : generators()) served |= g.stages_per_rank == 0 || g.stages_per_rank == *vpp;
    DUALPIPE_REQUIRE(served, given, ": no schedule runs vpp=", *vpp, " stages per rank");
    DUALPIPE_REQUIRE(!pp || *pp > 1, given, ": vpp=", *vpp, " needs a pipeline, so pp must be above 1");
  }
}

}  // namespace dualpipe::layout

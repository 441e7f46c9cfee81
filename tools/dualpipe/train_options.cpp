#include "train_options.h"

#include <type_traits>

#include "dualpipe/run/train_options.h"

namespace dualpipe::cli {

void add_train_options(CLI::App& sub, run::TrainConfig& config) {
  // The last of a repeated option wins, so a script can override its defaults by appending.
  sub.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  for (const run::TrainOption& option : run::train_options()) {
    const std::string names(option.names);
    CLI::Option* added = std::visit(
        [&](auto field) -> CLI::Option* {
          auto& value = field.at(config);
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, bool>) {
            CLI::Option* flag = sub.add_flag(names, value, option.help);
            // A switch (it has a --no- form) shows its default; a plain flag is off unless given.
            if (!run::negated_name(option).empty()) flag->option_text(value ? "(default: on)" : "(default: off)");
            return flag;
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            return sub.add_option(names, value, option.help)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
          } else if constexpr (run::kParsedFromText<T>) {  // a word or a list: the library parses it, once
            CLI::Option* o = sub.add_option_function<std::string>(
                names, [&option, &config](const std::string& text) { run::set_value_text(option, config, text); },
                option.help);
            if constexpr (std::is_same_v<T, ZeroStage>) o->type_name("INT");
            return option.show_default ? o->default_str(run::value_text(option, config)) : o;
          } else {
            CLI::Option* o = sub.add_option(names, value, option.help);
            return option.show_default ? o->capture_default_str() : o;
          }
        },
        option.field);
    added->group(std::string(option.group));
  }
  // --zero1, the old spelling of --zero 1: the same field, so giving both is refused as two answers to one question.
  CLI::Option* zero = sub.get_option("--zero");
  sub.add_flag_callback("--zero1", [&config] { config.parallel.zero = ZeroStage::OptimizerState; },
                        "The old spelling of --zero 1")
      ->group(zero->get_group())
      ->excludes(zero);
}

void add_train_launch_options(CLI::App& sub, TrainLaunch& launch) {
  const auto add = [&sub](const char* flag, auto& value, const char* help) {
    return sub.add_option(flag, value, help)->group("Launch (several machines: run it on each; docs/launch.md)");
  };
  add("--nnodes", launch.nnodes, "Machines in the job")->capture_default_str();
  add("--node-rank", launch.node_rank, "This machine's index, 0 to --nnodes minus 1")->capture_default_str();
  add("--nproc-per-node", launch.nproc_per_node,
      "Ranks on each machine (default: --ranks split evenly; node K runs ranks K*N to K*N+N-1)");
  add("--master-addr", launch.master_addr, "Address of node 0, where rank 0 hosts the rendezvous")
      ->capture_default_str();
  add("--master-port", launch.master_port,
      "Port of the rendezvous (default: a free one on one machine, 29500 on several)");
  add("--max-restarts", launch.max_restarts,
      "When a rank fails, restart every rank from the newest complete checkpoint in --checkpoint-dir, up to this many "
      "times")
      ->capture_default_str();
}

std::vector<std::string> train_launch_arguments(const TrainLaunch& launch) {
  return {"--nnodes",      std::to_string(launch.nnodes),         "--node-rank",   std::to_string(launch.node_rank),
          "--nproc-per-node", std::to_string(launch.nproc_per_node), "--master-addr", launch.master_addr,
          "--master-port", std::to_string(launch.master_port),    "--max-restarts", std::to_string(launch.max_restarts)};
}

}  // namespace dualpipe::cli

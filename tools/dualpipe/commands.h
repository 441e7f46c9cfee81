// The subcommands of the `dualpipe` tool. Each file cmd_<name>.cpp adds one subcommand to the app; its
// callback does the work and throws dualpipe::Error for bad input (main turns that into exit status 2).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

namespace dualpipe::cli {

// Adds subcommand `name`: its options fill one Command, shared with the callback that runs `run` on it. (`run` is
// a function pointer, not any callable: every file's is named run, and its parameter type picks this file's.)
template <typename Command, typename Run>
std::pair<CLI::App*, std::shared_ptr<Command>> add_command_running(CLI::App& app, const std::string& name, Run run,
                                                                  const std::string& description) {
  auto command = std::make_shared<Command>();
  CLI::App* sub = app.add_subcommand(name, description);
  sub->callback([command, run] { run(*command); });
  return {sub, command};
}
template <typename Command>
std::pair<CLI::App*, std::shared_ptr<Command>> add_command(CLI::App& app, const std::string& name,
                                                          void (*run)(const Command&), const std::string& description) {
  return add_command_running<Command>(app, name, run, description);
}
template <typename Command>
std::pair<CLI::App*, std::shared_ptr<Command>> add_command(CLI::App& app, const std::string& name,
                                                          void (*run)(Command&), const std::string& description) {
  return add_command_running<Command>(app, name, run, description);
}

void add_schedule_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_plan_command(CLI::App& app);
// The whole job's layout over a cluster (docs/layout.md).
void add_layout_command(CLI::App& app);
void add_draw_command(CLI::App& app);
void add_launch_command(CLI::App& app);
void add_compare_command(CLI::App& app);
// A PyTorch profiler trace's regions and costs (docs/profile.md).
void add_profile_command(CLI::App& app);
// Pictures of a training run from its metrics file (docs/plot.md).
void add_plot_command(CLI::App& app);
// Its ranks run dualpipe-train-worker, built only with LibTorch; without it the command says so.
void add_train_command(CLI::App& app);

}  // namespace dualpipe::cli

// The subcommands of the `dualpipe` tool. Each file cmd_<name>.cpp adds one subcommand to the app; its
// callback does the work and throws dualpipe::Error for bad input (main turns that into exit status 2).
#pragma once

#include <CLI/CLI.hpp>

namespace dualpipe::cli {

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

// `dualpipe launch`: run this machine's ranks of a job as local processes, like torchrun (the launcher itself is
// in launch/: launch.h).
#include <cstdlib>
#include <iostream>

#include "commands.h"
#include "dualpipe/launch/launch.h"
#include "dualpipe/util/error.h"

namespace dualpipe::cli {
namespace {

struct LaunchCommand {
  launch::LaunchOptions options;
  int nnodes = 1, node_rank = 0, nproc_per_node = -1, world_size = 0;  // -1: not given
};

void run(LaunchCommand& c) {
  launch::LaunchOptions& o = c.options;
  DUALPIPE_REQUIRE(c.nproc_per_node != -1,
                   "launch needs --nproc-per-node N (or --nproc N): the number of ranks to start on this machine");
  o.layout = c.world_size == 0 ? launch::layout_per_node(c.nnodes, c.node_rank, c.nproc_per_node)
                               : launch::layout_for_world(c.world_size, c.nnodes, c.node_rank, c.nproc_per_node);
  const int status = launch::run(o);
  if (status != 0) {
    // main() maps exceptions to status 2 (bad arguments) and 1; a launch that ran but failed has its own status
    // (1, or 128+N after signal N) and has already said why on stderr.
    std::cout.flush();
    std::exit(status);
  }
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto [sub, command] = add_command<LaunchCommand>(app, "launch", run,
      "Run this machine's ranks of a job as local processes (like torchrun, on one machine or several); "
      "output prefixed by rank; when one rank fails, stop them all, or restart them");
  sub->add_option("-n,--nproc-per-node,--nproc", command->nproc_per_node,
                  "Ranks (processes) to start on this machine, 1 to 1024");
  sub->add_option("--nnodes", command->nnodes, "Machines in the job; each runs `dualpipe launch` once")
      ->capture_default_str();
  sub->add_option("--node-rank", command->node_rank, "This machine's index, 0 to --nnodes minus 1; node 0 runs rank 0")
      ->capture_default_str();
  sub->add_option("--world-size", command->world_size,
                  "Ranks in the whole job, when fewer than --nnodes times --nproc-per-node (the last node runs fewer)");
  sub->add_option("--master-addr", command->options.master_addr,
                  "MASTER_ADDR for the ranks: the address of node 0, where rank 0 hosts the rendezvous store")
      ->capture_default_str();
  sub->add_option("--master-port", command->options.master_port,
                  "MASTER_PORT for the ranks (default: a free TCP port on one machine, 29500 on several)");
  sub->add_option("--max-restarts", command->options.max_restarts,
                  "When a rank fails, stop the others and start every rank again, up to this many times; each "
                  "attempt gets TORCHELASTIC_RESTART_COUNT")
      ->capture_default_str();
  sub->add_option("--timeout-grace", command->options.grace_seconds,
                  "Seconds between SIGTERM and SIGKILL when stopping ranks")
      ->capture_default_str();
  sub->add_option("PROGRAM", command->options.command, "The program every rank runs, then its arguments")
      ->type_name("ARGS...");
  // Everything from PROGRAM on belongs to the program, options included ("-- " before it is optional).
  sub->positionals_at_end();
  sub->footer(
      "Each rank gets torchrun's variables: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,\n"
      R"(MASTER_PORT, TORCHELASTIC_RESTART_COUNT and the rest (docs/launch.md). Output lines become "[rank R] line"
(stdout to stdout, stderr to stderr). When a rank exits non-zero or is killed, the others are stopped
(SIGTERM, then SIGKILL after --timeout-grace) and launch exits 1 naming the rank that failed first, unless
--max-restarts lets it start them all again.
Several machines: run it on each with the same --nnodes, --master-addr and --master-port; node K runs
ranks K*N to K*N+N-1 (N = --nproc-per-node).
Examples:
  dualpipe launch --nproc 4 -- ./train --steps 10
  dualpipe launch --nnodes 2 --node-rank 0 --nproc-per-node 4 --master-addr 10.0.0.1 --master-port 29500 -- ./train
  dualpipe launch --nproc 4 --max-restarts 3 -- ./train --resume)");
}

}  // namespace dualpipe::cli

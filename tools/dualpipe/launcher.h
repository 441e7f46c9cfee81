// Starting and supervising the local processes of `dualpipe launch` (the CLI glue is in cmd_launch.cpp, the
// output relay in line_relay.h).
//
// Each rank is an ordinary program that finds its peers through five environment variables, as under torchrun:
//   MASTER_ADDR  host of rank 0 (where the rendezvous store listens)
//   MASTER_PORT  TCP port of that store
//   RANK         this process's rank, 0 .. WORLD_SIZE-1
//   WORLD_SIZE   number of ranks in the job
//   LOCAL_RANK   this process's index among the ranks on its machine (and LOCAL_WORLD_SIZE, their number)
// The launcher only sets them; nothing else passes between it and the ranks. So the same programs work when
// started by hand on several machines with those variables exported (MASTER_ADDR = the machine of rank 0, the
// same MASTER_PORT and WORLD_SIZE everywhere, one RANK per process); see docs/launch.md.
#pragma once

#include <string>
#include <vector>

namespace dualpipe::cli {

struct LaunchOptions {
  int nproc = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;         // chosen by the caller; launch() passes it on and never binds it
  double grace_seconds = 5.0;  // between SIGTERM and SIGKILL when stopping ranks
  std::vector<std::string> command;  // PROGRAM ARGS...; PROGRAM without '/' is searched in PATH
};

// Starts options.nproc processes of options.command, each in its own process group, relays their output
// line by line with a "[rank R] " prefix (stdout to stdout, stderr to stderr), and waits for them. When one rank
// fails (non-zero status or a signal), or the launcher gets SIGINT/SIGTERM/SIGHUP, it stops every rank's process
// group (SIGTERM, then SIGKILL after the grace period) and says why on stderr. Returns the launcher's exit
// status: 0 when every rank exited 0, 1 when a rank failed, 128+N when the launcher got signal N.
// Throws InvalidArgument when PROGRAM cannot be executed ("cannot run 'x': No such file or directory"), after
// stopping any rank already started.
int launch(const LaunchOptions& options);

// "exited with status 3", "was killed by signal 9 (SIGKILL)": how a process ended, from a waitpid() status.
std::string describe_wait_status(int status);

}  // namespace dualpipe::cli

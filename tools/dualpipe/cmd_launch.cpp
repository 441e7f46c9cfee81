// `dualpipe launch`: run N local processes of a program as the ranks of one job, like torchrun.
//
// The ranks learn their place only from MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE and LOCAL_RANK (see
// launcher.h). A program started this way therefore also works when started by hand, one process per rank, on
// several machines: export MASTER_ADDR=<machine of rank 0> MASTER_PORT=29500 WORLD_SIZE=<n> RANK=<r> (and
// LOCAL_RANK) on each and run it; docs/launch.md shows how.
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "commands.h"
#include "dualpipe/error.h"
#include "launcher.h"

namespace dualpipe::cli {
namespace {

// More local processes than this is a typo, not a job; it also bounds the launcher's open pipes.
constexpr int kMaxRanks = 1024;

struct LaunchCommand {
  LaunchOptions options;
  int master_port = 0;  // 0: pick a free one
};

// A TCP port that is free on `address` right now: binds port 0 there, reads the port the kernel chose, closes.
// It is free now; rank 0 binds it moments later. Picking per launch (rather than a fixed 29500) keeps parallel
// jobs and test runs on one machine from colliding.
int pick_free_port(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(address.c_str(), "0", &hints, &found);
  DUALPIPE_REQUIRE(rc == 0, "--master-addr '", address, "' does not resolve: ", gai_strerror(rc));
  std::string last_error = "no address";
  int port = 0;
  for (const addrinfo* a = found; a && port == 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
      port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    } else {
      last_error = std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(found);
  DUALPIPE_REQUIRE(port != 0, "cannot pick a free port on --master-addr ", address, " (", last_error,
                   "): rank 0 runs here, so it must be an address of this machine; or pass --master-port");
  return port;
}

void run(LaunchCommand& c) {
  LaunchOptions& o = c.options;
  DUALPIPE_REQUIRE(o.nproc >= 1 && o.nproc <= kMaxRanks, "--nproc must be between 1 and ", kMaxRanks, ", got ",
                   o.nproc);
  DUALPIPE_REQUIRE(!o.command.empty() && !o.command[0].empty(),
                   "launch needs a PROGRAM to run: dualpipe launch --nproc N [options] -- PROGRAM ARGS...");
  DUALPIPE_REQUIRE(!o.master_addr.empty(), "--master-addr must not be empty");
  DUALPIPE_REQUIRE(c.master_port >= 0 && c.master_port <= 65535,
                   "--master-port must be a TCP port between 1 and 65535 (or 0 to pick a free one), got ",
                   c.master_port);
  DUALPIPE_REQUIRE(std::isfinite(o.grace_seconds) && o.grace_seconds >= 0 && o.grace_seconds <= 3600,
                   "--timeout-grace must be between 0 and 3600 seconds, got ", o.grace_seconds);

  o.master_port = c.master_port != 0 ? c.master_port : pick_free_port(o.master_addr);
  std::cerr << "dualpipe launch: " << o.nproc << (o.nproc == 1 ? " rank" : " ranks") << ", MASTER_ADDR="
            << o.master_addr << ", MASTER_PORT=" << o.master_port << std::endl;

  const int status = launch(o);
  if (status != 0) {
    // main() maps exceptions to status 2 (bad arguments) and 1; a launch that ran but failed has its own status
    // (1, or 128+N after signal N) and has already said why on stderr.
    std::cout.flush();
    std::exit(status);
  }
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto command = std::make_shared<LaunchCommand>();
  CLI::App* sub = app.add_subcommand(
      "launch", "Run N local processes of a program as the ranks of one job (like torchrun); output prefixed by "
                "rank; when one rank fails, stop them all");
  sub->footer(
      "Each rank gets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE in its "
      "environment.\n"
      "Output lines become \"[rank R] line\" (stdout to stdout, stderr to stderr). When a rank exits non-zero or\n"
      "is killed, the others are stopped (SIGTERM, then SIGKILL after --timeout-grace) and launch exits 1 naming\n"
      "the rank. Several machines: see docs/launch.md.\n"
      "Example: dualpipe launch --nproc 4 -- ./train --steps 10");
  sub->add_option("-n,--nproc", command->options.nproc, "Number of ranks (processes) to start, 1 to 1024")
      ->required();
  sub->add_option("--master-addr", command->options.master_addr,
                  "MASTER_ADDR for the ranks: the address rank 0 listens on")
      ->capture_default_str();
  sub->add_option("--master-port", command->master_port,
                  "MASTER_PORT for the ranks (default: a free TCP port on --master-addr)");
  sub->add_option("--timeout-grace", command->options.grace_seconds,
                  "Seconds between SIGTERM and SIGKILL when stopping ranks")
      ->capture_default_str();
  sub->add_option("PROGRAM", command->options.command, "The program every rank runs, then its arguments")
      ->type_name("ARGS...");
  // Everything from PROGRAM on belongs to the program, options included ("-- " before it is optional).
  sub->positionals_at_end();
  sub->callback([command] { run(*command); });
}

}  // namespace dualpipe::cli

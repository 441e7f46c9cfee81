// dualpipe: plan, run and inspect pipeline-parallel schedules.
#include <csignal>
#include <string_view>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "dualpipe/launch/signal_pipe.h"
#include "dualpipe/util/error.h"
#include "dualpipe/util/printable.h"
#include "output.h"

namespace {

using dualpipe::printable_message;  // errors quote inputs: escaped and bounded

// CLI11 prints a switch's negated name with the value it sets ("--dp-overlap,--no-dp-overlap{false}"), which
// reads as the default; the switch shows its real default as its option text instead (train_options.cpp).
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* option, bool is_positional) const override {
    std::string name = CLI::Formatter::make_option_name(option, is_positional);
    for (size_t open; (open = name.find('{')) != std::string::npos;) {
      const size_t close = name.find('}', open);
      name.erase(open, close == std::string::npos ? std::string::npos : close - open + 1);
    }
    return name;
  }
};

// Says why the command failed on stderr and returns its exit status.
int failed(int status, const std::exception& e, const char* hint = "", const char* kind = "") {
  std::cerr << "dualpipe: " << kind << printable_message(e.what()) << hint << "\n";
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  // SIGUSR1 asks a running job's ranks for a stall report (train, launch). From the first instant it must not end
  // the launcher: ignored here (and so through the exec of dualpipe-train-worker, which loads LibTorch for half a
  // second), taken up once the ranks run; the ranks start with its default action.
  if (argc > 1 && (std::string_view(argv[1]) == "train" || std::string_view(argv[1]) == "launch")) {
    std::signal(SIGUSR1, SIG_IGN);
    dualpipe::launch::say_when_stopped_while_no_rank_runs("dualpipe");
  }
  CLI::App app{"dualpipe: plan, draw, run and compare pipeline-parallel schedules (DualPipe, DualPipeV, 1F1B, "
               "Zero Bubble, Chimera, ...)",
               "dualpipe"};
  app.set_version_flag("--version", std::string("dualpipe ") + DUALPIPE_VERSION);
  app.require_subcommand(1);
  app.formatter(std::make_shared<HelpFormatter>());  // before the subcommands, which take the app's formatter
  app.footer("Run 'dualpipe COMMAND --help' for the options of a command.");
  dualpipe::cli::add_schedule_command(app);
  dualpipe::cli::add_simulate_command(app);
  dualpipe::cli::add_plan_command(app);
  dualpipe::cli::add_layout_command(app);
  dualpipe::cli::add_draw_command(app);
  dualpipe::cli::add_launch_command(app);
  dualpipe::cli::add_compare_command(app);
  dualpipe::cli::add_profile_command(app);
  dualpipe::cli::add_plot_command(app);
  dualpipe::cli::add_train_command(app);

  try {
    app.parse(argc, argv);
    // Output written piecewise (tables, std::printf) is checked here: a failed write is an error, not exit 0.
    dualpipe::cli::finish_stdout();
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::Success&) {  // an option that did its work while parsing (layout --list-presets)
    dualpipe::cli::finish_stdout();
    return 0;
  } catch (const CLI::ParseError& e) {
    return failed(2, e, "\nRun with --help for usage.");
  } catch (const dualpipe::InternalError& e) {
    return failed(1, e, "", "internal error (please report): ");
  } catch (const dualpipe::Error& e) {  // bad input
    return failed(2, e);
  } catch (const std::exception& e) {
    return failed(1, e);
  }
  return 0;
}

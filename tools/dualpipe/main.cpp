// dualpipe: plan, run and inspect pipeline-parallel schedules.
#include <iostream>
#include <string>

#include "commands.h"
#include "dualpipe/util/error.h"
#include "output.h"

int main(int argc, char** argv) {
  CLI::App app{"dualpipe: plan, draw, run and compare pipeline-parallel schedules (DualPipe, DualPipeV, 1F1B, "
               "Zero Bubble, Chimera, ...)",
               "dualpipe"};
  app.set_version_flag("--version", std::string("dualpipe ") + DUALPIPE_VERSION);
  app.require_subcommand(1);
  app.footer("Run 'dualpipe COMMAND --help' for the options of a command.");
  dualpipe::cli::add_schedule_command(app);
  dualpipe::cli::add_simulate_command(app);
  dualpipe::cli::add_plan_command(app);
  dualpipe::cli::add_draw_command(app);
  dualpipe::cli::add_launch_command(app);
  dualpipe::cli::add_compare_command(app);
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
  } catch (const CLI::ParseError& e) {
    std::cerr << "dualpipe: " << e.what() << "\nRun with --help for usage.\n";
    return 2;
  } catch (const dualpipe::InternalError& e) {
    std::cerr << "dualpipe: internal error (please report): " << e.what() << "\n";
    return 1;
  } catch (const dualpipe::Error& e) {
    std::cerr << "dualpipe: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dualpipe: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

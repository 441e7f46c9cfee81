#include "kineto_options.h"

namespace dualpipe::cli {

void add_kineto_options(CLI::App& command, KinetoReadOptions& read, KinetoCostNames& names) {
  command.add_option("--comm-kernel", read.communication_patterns,
                     "A regular expression (ECMAScript, any case) for kernel and operator names that are "
                     "communication, besides NCCL's, DeepEP's, gloo's, c10d's and the collectives' names; repeatable")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  const struct {
    const char* flag;
    std::string* pattern;
    const char* help;
  } costs[] = {
      {"--forward", &names.forward, "Regions read as F (one name: its median; several: the phases of a chunk)"},
      {"--backward", &names.backward,
       "Regions read as B (its input-gradient part where --weight's regions exist and --backward-input's do not)"},
      {"--backward-input", &names.backward_input, "Regions read as I, the input-gradient part of B"},
      {"--weight", &names.weight, "Regions read as W (none: W = B/2)"},
      {"--overlapped", &names.overlapped,
       "Regions read as FB, an overlapped pair; they also count the chunks of phases"},
      {"--comm", &names.comm, "Regions read as comm, one pipeline message"},
      {"--update", &names.update,
       "Regions of a step's work outside the pipeline (gradient reduction, optimizer), added to the simulated step"},
  };
  for (const auto& cost : costs)
    command.add_option(cost.flag, *cost.pattern, cost.help)
        ->group("Costs: regular expressions searched in region names, any case ('' reads none)")
        ->capture_default_str();
}

}  // namespace dualpipe::cli

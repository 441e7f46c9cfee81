#include "kineto_options.h"

namespace dualpipe::cli {

void add_kineto_options(CLI::App& command, KinetoReadOptions& read, KinetoCostNames& names) {
  command.add_option("--comm-kernel", read.communication_patterns,
                     "A regular expression (ECMAScript, any case) for kernel and operator names that are "
                     "communication, besides NCCL's, DeepEP's, gloo's, c10d's and the collectives' names; repeatable")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  const char* group = "Costs: regular expressions searched in region names, any case ('' reads none)";
  command
      .add_option("--forward", names.forward,
                  "Regions read as F (one name: its median; several: the phases of a chunk)")
      ->group(group)
      ->capture_default_str();
  command.add_option("--backward", names.backward,
                     "Regions read as B (its input-gradient part where --weight's regions exist and --backward-input's "
                     "do not)")
      ->group(group)
      ->capture_default_str();
  command.add_option("--backward-input", names.backward_input, "Regions read as I, the input-gradient part of B")
      ->group(group)
      ->capture_default_str();
  command.add_option("--weight", names.weight, "Regions read as W (none: W = B/2)")
      ->group(group)
      ->capture_default_str();
  command.add_option("--overlapped", names.overlapped,
                     "Regions read as FB, an overlapped pair; they also count the chunks of phases")
      ->group(group)
      ->capture_default_str();
  command.add_option("--comm", names.comm, "Regions read as comm, one pipeline message")
      ->group(group)
      ->capture_default_str();
  command.add_option("--update", names.update,
                     "Regions of a step's work outside the pipeline (gradient reduction, optimizer), added to the "
                     "simulated step")
      ->group(group)
      ->capture_default_str();
}

}  // namespace dualpipe::cli

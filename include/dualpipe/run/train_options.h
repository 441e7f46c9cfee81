// Every option of a training run, declared once. The command line of `dualpipe train` and of its ranks
// (tools/dualpipe/train_options.cpp), the arguments `dualpipe train` hands each rank, the config record of the
// metrics file (progress_report.cpp) and the train commands `dualpipe layout` prints are all generated from this
// table, so they cannot drift apart. LibTorch-free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dualpipe/run/train_config.h"

namespace dualpipe::run {

using TrainField = std::variant<int TrainConfig::*, int64_t TrainConfig::*, uint64_t TrainConfig::*,
                                double TrainConfig::*, std::string TrainConfig::*, bool TrainConfig::*,
                                std::vector<std::string> TrainConfig::*>;

struct TrainOption {
  // CLI11's names: "-r,--ranks,--pp". The first long name is the option's own: the ranks are given it, and the
  // metrics record names the value after it ("--seq-len": "seq_len"). A bool with a "!--no-..." name is a switch
  // with its default on; without one, a flag.
  std::string_view names;
  std::string help;
  std::string_view group;  // the section of --help
  TrainField field;
  bool show_default = true;  // print the default in --help
};

// "--ranks" of "-r,--ranks,--pp".
std::string primary_name(const TrainOption& option);
// "seq_len" of "--seq-len": the option's field in the metrics file's config record.
std::string record_key(const TrainOption& option);
// "--no-dp-overlap" of "--dp-overlap,!--no-dp-overlap"; empty for a flag without one.
std::string negated_name(const TrainOption& option);

// A --schedule-file sets the ranks and micro-batches of the run: reads it (bounded like every schedule reader)
// and sets config.ranks and config.microbatches to its counts. Nothing without one. Throws InvalidArgument naming
// the file when it cannot be read. `dualpipe train` calls it once, before it starts the ranks.
void resolve_schedule_file(TrainConfig& config);

// Every option, in the order of --help.
const std::vector<TrainOption>& train_options();

// The value of `option` in `config` as text, exactly (doubles to 17 significant digits): what the ranks are given.
// Not for vectors and bools, which become repeated options and switches.
std::string value_text(const TrainOption& option, const TrainConfig& config);

// `config` as command-line arguments, in the table's order: a switch as its name or its --no- name, a flag when
// set, a list as the option once per item. Every option (what `dualpipe train` hands its ranks: nothing left to
// defaults), or only those whose value differs from a default TrainConfig's and those of `always`.
std::vector<std::string> command_arguments(const TrainConfig& config, bool every_option,
                                           const std::vector<TrainField>& always = {});

}  // namespace dualpipe::run

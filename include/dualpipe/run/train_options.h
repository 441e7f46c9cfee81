// Every option of a training run, declared once. The command line of `dualpipe train` and of its ranks
// (tools/dualpipe/train_options.cpp), the arguments `dualpipe train` hands each rank, the config record of the
// metrics file (progress_report.cpp) and the train commands `dualpipe layout` prints are all generated from this
// table, so they cannot drift apart. LibTorch-free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "dualpipe/run/train_config.h"

namespace dualpipe::run {

// A field of TrainConfig in its section, reached by a function so that one table row names any section's field
// (DUALPIPE_TRAIN_FIELD(model.layers)).
template <typename T>
struct Field {
  T& (*at)(TrainConfig&);
  // The same field of a const config (the function only picks a member: it never writes).
  const T& in(const TrainConfig& config) const { return at(const_cast<TrainConfig&>(config)); }
};
using TrainField =
    std::variant<Field<int>, Field<int64_t>, Field<uint64_t>, Field<double>, Field<std::string>, Field<bool>,
                 Field<std::vector<std::string>>, Field<std::vector<int>>, Field<std::vector<double>>,
                 Field<OverlapMode>, Field<DeviceKind>, Field<Backend>, Field<StragglerAction>, Field<ZeroStage>>;

template <typename At>
TrainField train_field(At at) {
  using T = std::remove_reference_t<decltype(at(std::declval<TrainConfig&>()))>;
  return Field<T>{+at};
}
#define DUALPIPE_TRAIN_FIELD(path) \
  ::dualpipe::run::train_field([](::dualpipe::run::TrainConfig& c) -> auto& { return c.path; })

// Whether the field's type is a word or a list the command line gives as one piece of text (set_value_text parses
// it): the enums, --layers-per-stage and --rank-speed.
template <typename T>
constexpr bool kParsedFromText = std::is_enum_v<T> || std::is_same_v<T, std::vector<int>> ||
                                 std::is_same_v<T, std::vector<double>>;

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
// and sets config.parallel.pp and config.pipeline.microbatches to its counts. Nothing without one. Throws InvalidArgument naming
// the file when it cannot be read. `dualpipe train` calls it once, before it starts the ranks.
void resolve_schedule_file(TrainConfig& config);

// Every option, in the order of --help.
const std::vector<TrainOption>& train_options();

// The value of `option` in `config` as text, exactly (doubles to 17 significant digits): what the ranks are given.
// Not for lists of files and bools, which become repeated options and switches.
std::string value_text(const TrainOption& option, const TrainConfig& config);
// The reverse for the fields of kParsedFromText: parses `text` into `config`. Throws InvalidArgument naming the
// option, the rule and the text.
void set_value_text(const TrainOption& option, TrainConfig& config, const std::string& text);
// The value as the metrics file's config record holds it: numbers, bools and texts as themselves, words and lists
// as their text, the ZeRO stage as its number.
nlohmann::json record_value(const TrainOption& option, const TrainConfig& config);

// `config` as command-line arguments, in the table's order: a switch as its name or its --no- name, a flag when
// set, a list of files as the option once per item. Every option (what `dualpipe train` hands its ranks: nothing
// left to defaults), or only those whose value differs from a default TrainConfig's and those of `always`.
std::vector<std::string> command_arguments(const TrainConfig& config, bool every_option,
                                           const std::vector<TrainField>& always = {});

// Whether two TrainFields reach the same member (DUALPIPE_TRAIN_FIELD(model.layers) written twice makes two
// functions, which reach one member).
bool same_field(const TrainField& a, const TrainField& b);

}  // namespace dualpipe::run

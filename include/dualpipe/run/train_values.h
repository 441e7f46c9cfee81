// The words of a training run's enums and the text of its lists, both ways: the command line parses each once into
// TrainConfig's types, and the ranks' arguments, the metrics file's config record and `dualpipe layout`'s train
// commands print them back. LibTorch-free.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "dualpipe/run/train_config.h"

namespace dualpipe::run {

// Each enum's option and its words, in the order --help lists them.
template <typename E>
struct EnumWords;
template <>
struct EnumWords<OverlapMode> {
  static constexpr const char* option = "--fb-overlap-mode";
  static constexpr std::pair<OverlapMode, const char*> words[] = {
      {OverlapMode::Phases, "phases"}, {OverlapMode::Threads, "threads"}, {OverlapMode::Turns, "turns"}};
};
template <>
struct EnumWords<DeviceKind> {
  static constexpr const char* option = "--device";
  static constexpr std::pair<DeviceKind, const char*> words[] = {{DeviceKind::Cpu, "cpu"}, {DeviceKind::Cuda, "cuda"}};
};
template <>
struct EnumWords<Backend> {
  static constexpr const char* option = "--backend";
  static constexpr std::pair<Backend, const char*> words[] = {
      {Backend::Auto, "auto"}, {Backend::Gloo, "gloo"}, {Backend::Nccl, "nccl"}};
};
template <>
struct EnumWords<StragglerAction> {
  static constexpr const char* option = "--on-straggler";
  static constexpr std::pair<StragglerAction, const char*> words[] = {{StragglerAction::Report, "report"},
                                                                      {StragglerAction::Replan, "replan"}};
};
template <>
struct EnumWords<ZeroStage> {
  static constexpr const char* option = "--zero";
  static constexpr std::pair<ZeroStage, const char*> words[] = {{ZeroStage::None, "0"},
                                                                {ZeroStage::OptimizerState, "1"},
                                                                {ZeroStage::Gradients, "2"},
                                                                {ZeroStage::Parameters, "3"}};
};

// "phases, threads or turns".
template <typename E>
std::string word_list() {
  std::string list;
  const auto& words = EnumWords<E>::words;
  for (std::size_t i = 0; i < std::size(words); ++i)
    list += (i == 0 ? "" : i + 1 == std::size(words) ? " or " : ", ") + std::string(words[i].second);
  return list;
}

template <typename E>
const char* word_of(E value) {
  for (const auto& [each, word] : EnumWords<E>::words)
    if (each == value) return word;
  return "?";
}

// Throws InvalidArgument naming the option, the words and the text: "--device must be cpu or cuda, got 'tpu'".
void refuse_word(const char* option, const std::string& words, const std::string& text);

template <typename E>
E parse_word(const std::string& text) {
  for (const auto& [each, word] : EnumWords<E>::words)
    if (text == word) return each;
  refuse_word(EnumWords<E>::option, word_list<E>(), text);
  return {};
}

// --layers-per-stage "3,4,4,3" ("" is none: a balanced cut): positive layer counts (how many stages and layers they make is checked against the
// schedule and --layers where both are known). Throws InvalidArgument naming the item.
std::vector<int> parse_layer_counts(const std::string& text);
std::string format_layer_counts(const std::vector<int>& counts);  // "3,4,4,3"
// --rank-speed "1,1,0.67,1" ("" is none: every rank at 1; sim/cost_model.h's rules); printed so that the ranks read
// back the same doubles.
std::vector<double> parse_speeds(const std::string& text);
std::string speeds_text(const std::vector<double>& speeds);

}  // namespace dualpipe::run

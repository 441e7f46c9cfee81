// The corpus and sequences of a run (internal to the trainer).
#pragma once

#include <torch/types.h>

#include <utility>
#include <vector>

#include "dualpipe/data/corpus.h"
#include "dualpipe/data/sequence_reader.h"
#include "dualpipe/train/train_config.h"

namespace dualpipe::train {

struct TrainingData {
  data::Corpus corpus;
  data::SequenceReader reader;
};

// --data, or the default corpus, cut into --seq-len sequences shuffled by --seed. Throws InvalidArgument when
// the corpus is unusable or too short for one validation batch.
TrainingData load_training_data(const TrainConfig& config);

// [rows, seq_len] int64 tensors of a batch's inputs and targets.
std::pair<torch::Tensor, torch::Tensor> to_tensors(const data::SequenceBatch& batch);

// Those rows cut into `microbatches` inputs and targets, indexed by micro-batch.
std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> split_microbatches(const torch::Tensor& inputs,
                                                                                     const torch::Tensor& targets,
                                                                                     int microbatches);

}  // namespace dualpipe::train

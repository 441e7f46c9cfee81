#include "training_data.h"

#include <torch/torch.h>

#include "dualpipe/data/byte_tokenizer.h"

namespace dualpipe::train {

TrainingData load_training_data(const TrainConfig& c) {
  data::Corpus corpus = c.data.empty() ? data::Corpus::default_corpus() : data::Corpus::from_files(c.data);
  data::SequenceReader reader(data::ByteTokenizer().encode(corpus.text), c.seq_len, c.seed);
  return {std::move(corpus), std::move(reader)};
}

std::pair<torch::Tensor, torch::Tensor> to_tensors(const data::SequenceBatch& batch) {
  auto as_tensor = [&](const std::vector<int64_t>& tokens) {
    return torch::tensor(tokens, torch::kLong).reshape({batch.rows, batch.seq_len});
  };
  return {as_tensor(batch.inputs), as_tensor(batch.targets)};
}

}  // namespace dualpipe::train

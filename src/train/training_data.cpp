#include "training_data.h"

#include <torch/torch.h>

#include "dualpipe/data/byte_tokenizer.h"
#include "dualpipe/util/error.h"

namespace dualpipe::train {

TrainingData load_training_data(const TrainConfig& c) {
  data::Corpus corpus = c.data.files.empty() ? data::Corpus::default_corpus() : data::Corpus::from_files(c.data.files);
  data::SequenceReader reader(data::ByteTokenizer().encode(corpus.text), c.model.seq_len, c.data.seed);
  // Validation runs one step's worth of held-out sequences.
  const int64_t per_step = static_cast<int64_t>(c.pipeline.microbatches) * c.data.batch;
  DUALPIPE_REQUIRE(reader.validation_windows() >= per_step, "the validation split of the corpus holds ",
                   reader.validation_windows(), " sequences of --seq-len ", c.model.seq_len, ", fewer than one step's ",
                   per_step, " (--microbatches x --batch): use more --data or a shorter --seq-len");
  return {std::move(corpus), std::move(reader)};
}

std::pair<torch::Tensor, torch::Tensor> to_tensors(const data::SequenceBatch& batch) {
  auto as_tensor = [&](const std::vector<int64_t>& tokens) {
    return torch::tensor(tokens, torch::kLong).reshape({batch.rows, batch.seq_len});
  };
  return {as_tensor(batch.inputs), as_tensor(batch.targets)};
}

std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> split_microbatches(const torch::Tensor& inputs,
                                                                                     const torch::Tensor& targets,
                                                                                     int microbatches) {
  return {inputs.chunk(microbatches, 0), targets.chunk(microbatches, 0)};
}

}  // namespace dualpipe::train

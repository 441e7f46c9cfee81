// The transformer's tensor-parallel slices (see gpt_sharding.h).
#include "dualpipe/models/gpt_sharding.h"

#include "dualpipe/util/error.h"

namespace dualpipe::models {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TensorSplit tensor_split(const std::string& name) {
  // MoE layers are not split (their experts are sharded by expert parallelism): their router and experts' fc1 and
  // fc2 stay whole.
  if (name.find(".moe.") != std::string::npos) return TensorSplit::Whole;
  if (ends_with(name, "qkv.weight") || ends_with(name, "qkv.bias")) return TensorSplit::QkvRows;
  for (const char* rows : {"fc1.weight", "fc1.bias", "tokens.weight", "head.weight"})
    if (ends_with(name, rows)) return TensorSplit::Rows;
  for (const char* columns : {"proj.weight", "fc2.weight"})
    if (ends_with(name, columns)) return TensorSplit::Columns;
  return TensorSplit::Whole;
}

torch::Tensor tensor_shard(const std::string& name, const torch::Tensor& full, int rank, int size) {
  const TensorSplit split = tensor_split(name);
  if (size == 1 || split == TensorSplit::Whole) return full;
  const int64_t dim = split == TensorSplit::Columns ? 1 : 0;
  DUALPIPE_CHECK(full.dim() > dim, name, " has shape ", full.sizes(), ": nothing to split in dimension ", dim);
  if (split == TensorSplit::QkvRows) {
    DUALPIPE_CHECK(full.size(0) % (3 * size) == 0, name, " of ", full.size(0), " rows does not split into q, k, v of ",
                   size, " slices each");
    std::vector<int64_t> thirds = {3, full.size(0) / 3};
    for (int64_t d = 1; d < full.dim(); ++d) thirds.push_back(full.size(d));
    const int64_t part = thirds[1] / size;
    std::vector<int64_t> shape = full.sizes().vec();
    shape[0] /= size;
    return full.reshape(thirds).narrow(1, rank * part, part).reshape(shape);
  }
  DUALPIPE_CHECK(full.size(dim) % size == 0, name, " has ", full.size(dim), " in dimension ", dim,
                 ", not divisible by ", size, " tensor-parallel ranks");
  const int64_t part = full.size(dim) / size;
  return full.narrow(dim, rank * part, part);
}

torch::Tensor tensor_unshard(const std::string& name, const std::vector<torch::Tensor>& slices) {
  DUALPIPE_CHECK(!slices.empty(), "no slices of ", name);
  const TensorSplit split = tensor_split(name);
  if (slices.size() == 1 || split == TensorSplit::Whole) return slices.front();
  if (split == TensorSplit::Columns) return torch::cat(slices, 1);
  if (split == TensorSplit::Rows) return torch::cat(slices, 0);
  std::vector<torch::Tensor> thirds;  // each slice as its [3, rows / 3, ...] of q, k and v
  for (const torch::Tensor& slice : slices) {
    std::vector<int64_t> shape = slice.sizes().vec();
    shape[0] /= 3;
    shape.insert(shape.begin(), 3);
    thirds.push_back(slice.reshape(shape));
  }
  std::vector<int64_t> whole = slices.front().sizes().vec();
  whole[0] *= static_cast<int64_t>(slices.size());
  return torch::cat(thirds, 1).reshape(whole);
}

}  // namespace dualpipe::models

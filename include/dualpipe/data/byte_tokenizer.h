// Byte-level tokenization: every byte of the text is one token (256 symbols), so there is no vocabulary file
// and any text round-trips exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dualpipe::data {

class ByteTokenizer {
 public:
  static constexpr int64_t kVocabSize = 256;

  std::vector<int64_t> encode(std::string_view text) const;
  // Throws InvalidArgument for a token outside [0, 256).
  std::string decode(const std::vector<int64_t>& tokens) const;
};

}  // namespace dualpipe::data

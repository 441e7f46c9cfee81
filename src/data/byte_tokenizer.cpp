#include "dualpipe/data/byte_tokenizer.h"

#include "dualpipe/util/error.h"

namespace dualpipe::data {

std::vector<int64_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> tokens;
  tokens.reserve(text.size());
  for (unsigned char c : text) tokens.push_back(c);
  return tokens;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& tokens) const {
  std::string text;
  text.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    DUALPIPE_REQUIRE(tokens[i] >= 0 && tokens[i] < kVocabSize, "token ", tokens[i], " at position ", i,
                     " is not a byte (0 to 255)");
    text.push_back(static_cast<char>(tokens[i]));
  }
  return text;
}

}  // namespace dualpipe::data

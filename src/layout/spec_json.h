// Reading the planner's model and cluster files: one JSON object of known fields, each of its type, strictly.
#pragma once

#include <initializer_list>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace dualpipe::layout {

class SpecObject {
 public:
  // Throws InvalidArgument naming `source` when the text is not one JSON object.
  SpecObject(const std::string& json_text, std::string source);
  // Reads `key` when present into `value`, refusing a value of another type (naming the key and the type).
  void read(const char* key, int& value);
  void read(const char* key, double& value);
  void read(const char* key, bool& value);
  void read(const char* key, std::string& value);
  // Throws InvalidArgument naming the first key that no read() asked for.
  void refuse_unknown() const;
  // Throws InvalidArgument naming the first of `keys` that the object lacks (and listing them all).
  void require(std::initializer_list<const char*> keys) const;

 private:
  const nlohmann::json* find(const char* key);
  nlohmann::json object_;
  std::string source_;
  std::set<std::string> known_;
};

// A spec file's text (at most 1 MiB); errors say the value of `option` is neither a preset nor a readable file.
std::string read_spec_file(const std::string& path, const std::string& option);

}  // namespace dualpipe::layout

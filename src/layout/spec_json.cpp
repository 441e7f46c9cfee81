#include "layout/spec_json.h"

#include <cmath>
#include <limits>
#include <sys/stat.h>

#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"

namespace dualpipe::layout {

SpecObject::SpecObject(const std::string& json_text, std::string source) : source_(std::move(source)) {
  try {
    // A spec is one flat object; deeper nesting is refused while parsing, before it is built (a value nested a
    // million levels deep would overflow the stack when printed or freed).
    object_ = nlohmann::json::parse(json_text, [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      DUALPIPE_REQUIRE(depth <= 2, source_, ": a spec is one object of numbers, strings and booleans; nothing "
                                             "may nest inside it");
      return true;
    });
  } catch (const nlohmann::json::parse_error& e) {
    throw InvalidArgument(detail::concat(source_, ": not valid JSON (", e.what(), ")"));
  }
  DUALPIPE_REQUIRE(object_.is_object(), source_, ": must hold one JSON object of fields, got a ",
                   object_.type_name());
}

const nlohmann::json* SpecObject::find(const char* key) {
  known_.insert(key);
  const auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

void SpecObject::read(const char* key, int& value) {
  const nlohmann::json* field = find(key);
  if (!field) return;
  DUALPIPE_REQUIRE(field->is_number_integer() || field->is_number_unsigned(), source_, ": '", key,
                   "' must be a whole number, got ", field->dump());
  const auto number = field->get<long long>();
  DUALPIPE_REQUIRE(number >= 0 && number <= std::numeric_limits<int>::max(), source_, ": '", key, "'=", number,
                   " must be between 0 and ", std::numeric_limits<int>::max());
  value = int(number);
}

void SpecObject::read(const char* key, double& value) {
  const nlohmann::json* field = find(key);
  if (!field) return;
  DUALPIPE_REQUIRE(field->is_number(), source_, ": '", key, "' must be a number, got ", field->dump());
  value = field->get<double>();
  DUALPIPE_REQUIRE(std::isfinite(value) && value >= 0, source_, ": '", key, "'=", field->dump(),
                   " must be a finite number >= 0");
}

void SpecObject::read(const char* key, bool& value) {
  const nlohmann::json* field = find(key);
  if (!field) return;
  DUALPIPE_REQUIRE(field->is_boolean(), source_, ": '", key, "' must be true or false, got ", field->dump());
  value = field->get<bool>();
}

void SpecObject::read(const char* key, std::string& value) {
  const nlohmann::json* field = find(key);
  if (!field) return;
  DUALPIPE_REQUIRE(field->is_string(), source_, ": '", key, "' must be a string, got ", field->dump());
  value = field->get<std::string>();
  DUALPIPE_REQUIRE(!value.empty() && value.size() <= 200, source_, ": '", key,
                   "' must have 1 to 200 characters, got ", value.size());
}

void SpecObject::refuse_unknown() const {
  for (const auto& item : object_.items()) {
    if (known_.count(item.key())) continue;
    std::string known;
    for (const auto& key : known_) known += (known.empty() ? "" : ", ") + key;
    throw InvalidArgument(detail::concat(source_, ": unknown field '", item.key(), "' (known: ", known, ")"));
  }
}

std::string read_spec_file(const std::string& path, const std::string& option) {
  struct stat info {};
  DUALPIPE_REQUIRE(::stat(path.c_str(), &info) == 0, option, " '", path,
                   "' is neither a preset nor an existing file (the presets: dualpipe layout --list-presets)");
  return read_file_within(path, 1 << 20, option);
}

}  // namespace dualpipe::layout

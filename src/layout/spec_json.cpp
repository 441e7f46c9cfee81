#include "layout/spec_json.h"

#include <cerrno>
#include <cmath>
#include <limits>
#include <sys/stat.h>

#include "dualpipe/util/error.h"
#include "dualpipe/util/file_input.h"
#include "dualpipe/util/printable.h"

namespace dualpipe::layout {

SpecObject::SpecObject(const std::string& json_text, std::string source) : source_(std::move(source)) {
  try {
    // A spec is one flat object; deeper nesting is refused while parsing, before it is built (a value nested a
    // million levels deep would overflow the stack when printed or freed).
    // A key given twice would silently take its last value.
    std::set<std::string> keys;
    object_ = nlohmann::json::parse(json_text, [&](int depth, nlohmann::json::parse_event_t event,
                                                   nlohmann::json& parsed) {
      DUALPIPE_REQUIRE(depth <= 2, source_, ": a spec is one object of numbers, strings and booleans; nothing "
                                             "may nest inside it");
      if (event == nlohmann::json::parse_event_t::key && depth == 1)
        DUALPIPE_REQUIRE(keys.insert(parsed.get<std::string>()).second, source_, ": field '",
                         printable_line(parsed.get<std::string>()), "' is given twice");
      return true;
    });
  } catch (const nlohmann::json::exception& e) {
    // A syntax error, or a number no double holds (1e999: out_of_range, once a crash of the fuzzer and exit 1).
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
  // Printed back in headers and tables: nothing a terminal would act on (the rule of a plan file's header).
  const size_t bad = first_unprintable(value);
  DUALPIPE_REQUIRE(bad == std::string::npos, source_, ": '", key, "' holds a control character at byte ", bad,
                   " (0x", std::hex, std::uppercase, int(static_cast<unsigned char>(value[bad])),
                   "); names are printable text");
}

void SpecObject::require(std::initializer_list<const char*> keys) const {
  for (const char* key : keys) {
    if (object_.contains(key)) continue;
    std::string all;
    for (const char* k : keys) all += (all.empty() ? "" : ", ") + std::string(k);
    throw InvalidArgument(detail::concat(source_, ": missing field '", key, "' (required: ", all, ")"));
  }
}

void SpecObject::refuse_unknown() const {
  for (const auto& item : object_.items()) {
    if (known_.count(item.key())) continue;
    std::string known;
    for (const auto& key : known_) known += (known.empty() ? "" : ", ") + key;
    throw InvalidArgument(
        detail::concat(source_, ": unknown field '", printable_line(item.key()), "' (known: ", known, ")"));
  }
}

std::string read_spec_file(const std::string& path, const std::string& option) {
  struct stat info {};
  const bool found = ::stat(path.c_str(), &info) == 0;
  DUALPIPE_REQUIRE(found || errno != ELOOP, option, " '", path, "' is a loop of symbolic links");
  DUALPIPE_REQUIRE(found, option, " '", path,
                   "' is neither a preset nor an existing file (the presets: dualpipe layout --list-presets)");
  return read_file_within(path, 1 << 20, option);
}

}  // namespace dualpipe::layout

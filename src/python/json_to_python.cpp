#include "json_to_python.h"

#include <cstdio>

namespace dualpipe::python {

namespace py = pybind11;

py::object to_python(const nlohmann::ordered_json& value) {
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::object: {
      py::dict out;  // Python dicts keep insertion order: the fields come in the json's order
      for (const auto& [key, item] : value.items()) out[py::str(key)] = to_python(item);
      return std::move(out);
    }
    case nlohmann::ordered_json::value_t::array: {
      py::list out;
      for (const auto& item : value) out.append(to_python(item));
      return std::move(out);
    }
    case nlohmann::ordered_json::value_t::string: return py::str(value.get_ref<const std::string&>());
    case nlohmann::ordered_json::value_t::boolean: return py::bool_(value.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return py::int_(value.get<long long>());
    case nlohmann::ordered_json::value_t::number_unsigned: return py::int_(value.get<unsigned long long>());
    case nlohmann::ordered_json::value_t::number_float: return py::float_(value.get<double>());
    default: return py::none();
  }
}

std::string exact_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

std::string short_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

}  // namespace dualpipe::python

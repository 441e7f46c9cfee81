// nlohmann json values as Python objects (dict, list, str, int, float, bool, None), built directly: the Python
// objects carry the fields of the command line's --format json without printing and parsing text.
#pragma once

#include <string>

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

namespace dualpipe::python {

pybind11::object to_python(const nlohmann::ordered_json& value);

// A number as text that reads back to the same double (17 significant digits): for the library's text readers
// (--cost, layer-cost tables), which hold the rules and messages that keyword and list arguments get too.
std::string exact_text(double value);
// A number as a person reads it in a repr: 6 significant digits, no trailing zeros ("45.5", "0.0714286").
std::string short_text(double value);

// to_dict(): the json form the command line prints, as Python values; == on it, so that two results of the same
// inputs, or a result and one read back from its files, are equal.
template <typename T, typename ToJson>
void add_json_output(pybind11::class_<T>& cls, ToJson to_json, const char* what) {
  cls.def("to_dict", [to_json](const T& self) { return to_python(to_json(self)); },
          (std::string("The fields of ") + what + ", as a dict in the order the json output prints them.").c_str());
  cls.def("__eq__", [to_json](const T& self, const T& other) { return to_json(self) == to_json(other); });
}

// add_json_output, and each field of the json form as an attribute, listed by dir(): for the cost model, whose
// fields are the --cost keys.
template <typename T, typename ToJson>
void add_json_fields(pybind11::class_<T>& cls, ToJson to_json, const char* what) {
  add_json_output(cls, to_json, what);
  cls.def("__getattr__", [to_json, what](const T& self, const std::string& name) -> pybind11::object {
    const nlohmann::ordered_json json = to_json(self);
    const auto field = json.find(name);
    if (field == json.end())
      throw pybind11::attribute_error(std::string(what) + " has no field '" + name + "' (see to_dict())");
    return to_python(*field);
  });
  cls.def("__dir__", [to_json](const T& self) {
    pybind11::list names;
    for (const auto& [key, value] : to_json(self).items()) names.append(pybind11::str(key));
    return names;
  });
}

}  // namespace dualpipe::python

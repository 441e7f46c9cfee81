// The library's errors as Python's, one mapping for both extensions (dualpipe._core and dualpipe._runtime): bad
// input is ValueError, in the words of Python's keyword arguments where the library names a command-line option.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <string>
#include <utility>

#include "dualpipe/util/error.h"

namespace dualpipe::python {

// The library's messages name the command line's options; Python callers know them as keyword arguments.
inline std::string for_python(std::string message) {
  for (const auto& [option, argument] : {std::pair<std::string, std::string>{"--max-memory", "max_memory="},
                                         {"--stages-per-rank", "stages_per_rank="}})
    for (std::size_t at = message.find(option); at != std::string::npos; at = message.find(option, at))
      message.replace(at, option.size(), argument);
  return message;
}

// No error only one extension knows.
inline PyObject* no_own_errors(const std::exception&) { return nullptr; }

// Registers the translator of this extension only: pybind11's global translators are shared by every module of
// its build, so one module's would answer for the other's exceptions. `Classify` names the Python type of the
// errors only this extension knows (a peer's failure in _runtime), or returns null; then InvalidArgument and
// InvalidSchedule are ValueError, and anything else is left to pybind11 (RuntimeError for a std::exception).
// (A template argument, not a function argument: pybind11 takes translators as plain function pointers.)
template <PyObject* (*Classify)(const std::exception&) = no_own_errors>
void translate_errors() {
  pybind11::register_local_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const std::exception& e) {
      PyObject* type = Classify(e);
      if (!type && (dynamic_cast<const InvalidArgument*>(&e) || dynamic_cast<const InvalidSchedule*>(&e)))
        type = PyExc_ValueError;
      if (!type) throw;
      PyErr_SetString(type, for_python(e.what()).c_str());
    }
  });
}

}  // namespace dualpipe::python

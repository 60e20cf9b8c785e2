// What the binding files share (glue.hpp): StepError, opening a thread's step, a tracer or a
// stream argument read from Python, interned names. Defined here, used by every other file.
#include "glue.hpp"

#include <pybind11/pybind11.h>

#include "register.hpp"

namespace py = pybind11;

namespace steptrace::bindings {

PyObject* step_error = nullptr;

bool open_step(tracer& t, const stream_arg& stream) {
  if ((stream ? t.begin_step(stream_ptr(stream)) : t.begin_step()) != step_open::nested) return true;
  PyErr_SetString(step_error,
                  "steptrace: a step is already open on this thread; steps do not nest (use "
                  "steptrace.phase() for the inner scope; a `for item in steptrace.steps(...)` loop "
                  "already opens one step per item)");
  return false;
}

PyObject* name_text(const std::string& v) {
  return PyUnicode_DecodeUTF8(v.data(), static_cast<Py_ssize_t>(v.size()), "surrogateescape");
}

tracer* tracer_of(PyObject* obj) {
  try {
    return py::handle(obj).cast<tracer*>();
  } catch (const py::cast_error&) {
    PyErr_Format(PyExc_TypeError, "steptrace: expected a steptrace._core.Tracer, not %.100s", Py_TYPE(obj)->tp_name);
    return nullptr;
  }
}

bool stream_of(PyObject* obj, stream_arg* out) {
  if (obj == nullptr || obj == Py_None) {
    out->reset();
    return true;
  }
  const unsigned long long v = PyLong_AsUnsignedLongLong(obj);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return false;
  *out = static_cast<std::uintptr_t>(v);
  return true;
}

std::string os_path(PyObject* given) {
  // A NUL byte is kept: the writer refuses it by name (EINVAL), never a path cut short at it.
  py::object path = py::reinterpret_steal<py::object>(PyOS_FSPath(given));
  if (!path) throw py::error_already_set();
  if (PyUnicode_Check(path.ptr())) path = py::reinterpret_steal<py::object>(PyUnicode_EncodeFSDefault(path.ptr()));
  if (!path) throw py::error_already_set();
  return std::string(py::reinterpret_borrow<py::bytes>(path));
}

PyObject* os_text(const std::string& path) {
  return PyUnicode_DecodeFSDefaultAndSize(path.data(), static_cast<Py_ssize_t>(path.size()));
}

void intern_all(std::initializer_list<std::pair<PyObject**, const char*>> names) {
  for (auto [slot, text] : names) {
    *slot = PyUnicode_InternFromString(text);
    if (*slot == nullptr) throw py::error_already_set();
  }
}

void bind_glue(py::module_& m) {
  step_error = PyErr_NewException("steptrace.StepError", PyExc_RuntimeError, nullptr);
  m.attr("StepError") = py::handle(step_error);
}

}  // namespace steptrace::bindings

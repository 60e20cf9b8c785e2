// What the binding files share: the StepError type, a CUDA stream argument, opening a step with
// StepError for a nested one, and the asyncio request of the current context.
#pragma once

#include <Python.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "steptrace/steptrace.hpp"

namespace steptrace::bindings {

extern PyObject* step_error;  // steptrace.StepError

// A CUDA stream handle from Python: None asks for no device timing; 0 is the default stream.
using stream_arg = std::optional<std::uintptr_t>;
inline void* stream_ptr(const stream_arg& stream) { return reinterpret_cast<void*>(stream.value_or(0)); }

// Opens a step on this thread; false with StepError set when one is already open.
bool open_step(tracer& t, const stream_arg& stream);

// The open request of the current context for tracer `t` (nullptr: none, use the thread's
// step). False with a Python error set when the context could not be read (requests.cpp).
bool current_request(const tracer& t, request** out);
request* request_here(const tracer& t);  // the same, throwing for pybind11's functions

// The tracer behind a steptrace._core.Tracer object; nullptr with TypeError set.
tracer* tracer_of(PyObject* obj);

// None, or a stream handle (an int >= 0); false with an error set for anything else.
bool stream_of(PyObject* obj, stream_arg* out);

// A name's bytes as Python spells names (UTF-8, other bytes as surrogates); a new reference, or
// nullptr with an error set.
PyObject* name_text(const std::string& v);

// A path as Python holds it (str, bytes or os.PathLike) as the bytes the OS names it by (a str
// through the file system's encoding with surrogateescape: bytes outside UTF-8 reach the same
// file); throws pybind11's error_already_set for anything else. And back: `os_text`, a new
// reference (nullptr with an error set), as os.fsdecode gives it.
std::string os_path(PyObject* given);
PyObject* os_text(const std::string& path);

// Interned Python strings for the names the C types look up; throws if one cannot be made.
void intern_all(std::initializer_list<std::pair<PyObject**, const char*>> names);

// The slots every garbage-collected C type here fills (PyType_Ready is the caller's, after any
// slot of its own).
inline void gc_type(PyTypeObject& type, const char* name, Py_ssize_t size, const char* doc, newfunc make,
                    destructor dealloc, traverseproc traverse, inquiry clear, PyMethodDef* methods) {
  type.tp_name = name;
  type.tp_basicsize = size;
  type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  type.tp_doc = doc;
  type.tp_new = make;
  type.tp_dealloc = dealloc;
  type.tp_traverse = traverse;
  type.tp_clear = clear;
  type.tp_methods = methods;
}

}  // namespace steptrace::bindings

// steptrace._core.StepLoop: steps(iterable) as a CPython iterator, with no pybind11 dispatch and
// no allocation per step. See bindings/README.md, "Python loops and interrupts".
#include <pybind11/pybind11.h>

#include <cstdint>
#include <new>
#include <optional>
#include <thread>

#include "glue.hpp"
#include "register.hpp"
#include "steptrace/steptrace.hpp"

namespace py = pybind11;
using namespace steptrace;
using namespace steptrace::bindings;

namespace {

// _annotate's `watched` (a profiler session records, or a capture is armed), which it sets here
// too: read once an item, as a plain flag (the GIL orders it).
bool watched = false;
PyObject* str_hook = nullptr;
PyObject* str_active = nullptr;
PyObject* str_begin = nullptr;
PyObject* str_end = nullptr;
PyObject* str_input = nullptr;
PyObject* str_step = nullptr;

// ---- StepLoop: steps(iterable). Each item is one step and getting it is its `input` phase; the
// loop's state moves in C, so an interrupt (raised at a Python call or back-edge) lands before
// or after a move, never inside one. While a torch.profiler session runs or a capture is armed
// (the _annotate module's `watched`), steps and fetches are also ranges and the capture's hook
// hears each step begin and end. Leaving the loop (break, return, an exception in its body)
// ends the open step as completed when the loop object goes; a failed fetch, or an exception
// from steptrace's own calls, ends it as failed. See bindings/README.md, "Python loops".

// What the loop has open: its item's fetch (and its `input` phase) or its step. Closing happens
// only on the thread that opened it: a tracer's state is per thread, and ending it from another
// thread would end that thread's own step.
class loop_guard {
 public:
  loop_guard(tracer& t, const stream_arg& stream, bool time_input) : t_(&t), stream_(stream), input_(time_input) {}
  loop_guard(const loop_guard&) = delete;
  loop_guard& operator=(const loop_guard&) = delete;
  ~loop_guard() { close(true); }  // the backstop: whatever is still open ends as failed

  void fetch_begins() {
    if (input_) t_->begin_phase(builtin::input);
    mark(fetching);
  }
  // The item came: the fetch ends and its step opens (false with StepError set if a step is
  // open: then nothing is).
  bool step_begins() {
    end_fetch();
    if (!open_step(*t_, stream_)) return false;
    mark(in_step);
    return true;
  }
  void step_ends() {
    open_ = nothing;
    t_->end_step(false);
  }
  // Ends what is open. A failed fetch is claimed by a failed step, so the step count sees it.
  void close(bool failed) {
    if (open_ != nothing && thread_ != std::this_thread::get_id()) return;
    if (open_ == fetching) {
      end_fetch();
      if (!failed) return;
      const step_open opened = stream_ ? t_->begin_step(stream_ptr(stream_)) : t_->begin_step();
      if (opened == step_open::opened) t_->end_step(true);
    } else if (open_ == in_step) {
      open_ = nothing;
      t_->end_step(failed);
    }
  }

 private:
  enum state { nothing, fetching, in_step };
  void mark(state s) {
    open_ = s;
    thread_ = std::this_thread::get_id();
  }
  void end_fetch() {
    open_ = nothing;
    if (input_) t_->end_phase(builtin::input);
  }

  tracer* t_;
  stream_arg stream_;
  bool input_;  // the fetch is timed as `input` (not when an instrumented loader times its own)
  state open_ = nothing;
  std::thread::id thread_;
};

struct loop_obj {
  PyObject_HEAD PyObject* owner;  // the Tracer object (also the owner of the `step` range)
  PyObject* it;                   // the iterator; nullptr once the loop is done
  PyObject* annotate;             // the _annotate module's dict
  PyObject* hook;                 // the capture hook told of this step's begin, to be told of its end
  loop_guard* guard;
  bool time_input;
  bool in_step;
  bool annotated;  // this step's ranges are in a profiler trace
};

// Calls _annotate's begin(owner, name) or end(owner) (name nullptr); false with its exception
// set (they catch every Exception themselves: this is an interrupt).
bool annotate_call(loop_obj* self, PyObject* fn_name, PyObject* owner, PyObject* name) {
  PyObject* fn = PyDict_GetItemWithError(self->annotate, fn_name);
  if (fn == nullptr) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_AttributeError, "steptrace._profiler.annotate has no %S", fn_name);
    return false;
  }
  PyObject* args[] = {owner, name};
  PyObject* result = PyObject_Vectorcall(fn, args, name != nullptr ? 2 : 1, nullptr);
  Py_XDECREF(result);
  return result != nullptr;
}

// Calls the hook with `what` and the loop's tracer; false with its exception set.
bool hook_call(PyObject* hook, const char* what, PyObject* owner) {
  PyObject* word = PyUnicode_FromString(what);
  if (word == nullptr) return false;
  PyObject* args[] = {word, owner};
  PyObject* result = PyObject_Vectorcall(hook, args, 2, nullptr);
  Py_DECREF(word);
  Py_XDECREF(result);
  return result != nullptr;
}

// Keeps the first exception: a later one, from the loop's own closing, is dropped.
void keep_first(PyObject** type, PyObject** value, PyObject** traceback) {
  if (*type == nullptr) {
    PyErr_Fetch(type, value, traceback);
  } else {
    PyErr_Clear();
  }
}

// The loop ends: ranges closed, what is open closed (as failed for `failed`), the current hook
// told, and the iterator let go. An exception already set stays; otherwise the first one raised
// here is set, and false returned. True when it had already finished.
bool loop_finish(loop_obj* self, bool failed) {
  if (self->it == nullptr) return true;  // already finished
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  if (self->annotated) {  // end() closes only a range its owner has innermost: safe whatever is open
    if (!annotate_call(self, str_end, self->owner, nullptr)) keep_first(&type, &value, &traceback);
    if (!annotate_call(self, str_end, self->it, nullptr)) keep_first(&type, &value, &traceback);
  }
  const bool in_step = self->in_step;
  self->guard->close(failed);
  self->in_step = false;
  Py_CLEAR(self->hook);
  PyObject* hook = PyDict_GetItemWithError(self->annotate, str_hook);
  if (hook != nullptr && hook != Py_None) {  // a capture in flight ends with the steps it has
    Py_INCREF(hook);
    if (!hook_call(hook, in_step ? "left" : "stop", self->owner)) keep_first(&type, &value, &traceback);
    Py_DECREF(hook);
  } else if (hook == nullptr) {
    PyErr_Clear();
  }
  Py_CLEAR(self->it);
  PyErr_Restore(type, value, traceback);
  return type == nullptr;
}

PyObject* loop_fail(loop_obj* self) {
  loop_finish(self, true);
  return nullptr;
}

PyObject* loop_next(PyObject* obj) {
  auto* self = reinterpret_cast<loop_obj*>(obj);
  if (self->it == nullptr) return nullptr;
  if (self->in_step) {  // the previous item's step ends
    if (self->annotated && !annotate_call(self, str_end, self->owner, nullptr)) return loop_fail(self);
    self->guard->step_ends();
    self->in_step = false;
    if (self->hook != nullptr) {
      PyObject* hook = self->hook;
      self->hook = nullptr;
      const bool told = hook_call(hook, "end", self->owner);
      Py_DECREF(hook);
      if (!told) return loop_fail(self);
    }
  }
  self->annotated = false;
  if (watched) {  // a profiler session records, or a capture is armed
    PyObject* hook = PyDict_GetItemWithError(self->annotate, str_hook);
    if (hook != nullptr && hook != Py_None) {
      Py_INCREF(hook);
      self->hook = hook;
      if (!hook_call(hook, "begin", self->owner)) return loop_fail(self);
    }
    PyObject* active = PyDict_GetItemWithError(self->annotate, str_active);
    self->annotated = active == Py_True;
  }
  // The input range opens before the fetch is stamped, as a phase's range encloses the phase
  // (_annotate.py): the fetch leaves out the cost of opening it.
  const bool ranges = self->annotated && self->time_input;
  if (ranges && !annotate_call(self, str_begin, self->it, str_input)) return loop_fail(self);
  self->guard->fetch_begins();
  PyObject* item = Py_TYPE(self->it)->tp_iternext(self->it);
  if (item == nullptr) {
    if (PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_StopIteration)) return loop_fail(self);  // a failed fetch
      PyErr_Clear();
    }
    loop_finish(self, false);
    return nullptr;  // StopIteration, or what closing the loop raised
  }
  if (ranges && !annotate_call(self, str_end, self->it, nullptr)) {
    Py_DECREF(item);
    return loop_fail(self);
  }
  if (!self->guard->step_begins()) {
    Py_DECREF(item);
    return loop_fail(self);
  }
  self->in_step = true;
  if (self->annotated && !annotate_call(self, str_begin, self->owner, str_step)) {
    Py_DECREF(item);
    return loop_fail(self);  // the step it opened ends as failed
  }
  return item;
}

PyObject* loop_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"tracer", "iterable", "stream", "time_input", "annotate", nullptr};
  PyObject* owner = nullptr;
  PyObject* iterable = nullptr;
  PyObject* stream_obj = Py_None;
  int time_input = 1;
  PyObject* annotate = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOpO!:StepLoop", const_cast<char**>(names), &owner, &iterable,
                                   &stream_obj, &time_input, &PyModule_Type, &annotate)) {
    return nullptr;
  }
  tracer* t = tracer_of(owner);
  stream_arg stream;
  if (t == nullptr || !stream_of(stream_obj, &stream)) return nullptr;
  PyObject* it = PyObject_GetIter(iterable);
  if (it == nullptr) return nullptr;
  auto* self = reinterpret_cast<loop_obj*>(type->tp_alloc(type, 0));
  if (self == nullptr) {
    Py_DECREF(it);
    return nullptr;
  }
  self->guard = new (std::nothrow) loop_guard(*t, stream, time_input != 0);
  if (self->guard == nullptr) {
    Py_DECREF(it);
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  Py_INCREF(owner);
  self->owner = owner;
  self->it = it;
  self->annotate = PyModule_GetDict(annotate);
  Py_INCREF(self->annotate);
  self->time_input = time_input != 0;
  return reinterpret_cast<PyObject*>(self);
}

// The loop object goes (the `for` was left, or finished): whatever it has open ends as completed.
// It may go while an exception propagates (the loop's body raised): that one is kept as it is.
void loop_finalize(PyObject* obj) {
  auto* self = reinterpret_cast<loop_obj*>(obj);
  if (self->guard == nullptr || self->it == nullptr) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  if (!loop_finish(self, false)) PyErr_WriteUnraisable(obj);
  PyErr_Restore(type, value, traceback);
}

void loop_dealloc(PyObject* obj) {
  if (PyObject_CallFinalizerFromDealloc(obj) < 0) return;  // resurrected by its finalizer
  auto* self = reinterpret_cast<loop_obj*>(obj);
  PyObject_GC_UnTrack(obj);
  delete self->guard;
  Py_CLEAR(self->it);
  Py_CLEAR(self->hook);
  Py_CLEAR(self->annotate);
  Py_CLEAR(self->owner);
  Py_TYPE(obj)->tp_free(obj);
}

int loop_traverse(PyObject* obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<loop_obj*>(obj);
  Py_VISIT(self->it);
  Py_VISIT(self->hook);
  return 0;
}

int loop_clear(PyObject* obj) {  // in a cycle: the finalizer has closed the loop already
  auto* self = reinterpret_cast<loop_obj*>(obj);
  Py_CLEAR(self->it);
  Py_CLEAR(self->hook);
  return 0;
}

PyObject* loop_close(PyObject* obj, PyObject*) {
  if (!loop_finish(reinterpret_cast<loop_obj*>(obj), false)) return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef loop_methods[] = {
    {"close", loop_close, METH_NOARGS, "close(): leaves the loop; its open step ends as completed"},
    {nullptr, nullptr, 0, nullptr}};

PyTypeObject loop_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

}  // namespace

void steptrace::bindings::bind_step_loop(py::module_& m) {
  intern_all({{&str_hook, "hook"},
              {&str_active, "active"},
              {&str_begin, "begin"},
              {&str_end, "end"},
              {&str_input, "input"},
              {&str_step, "step"}});
  gc_type(loop_type, "steptrace._core.StepLoop", sizeof(loop_obj),
          "StepLoop(tracer, iterable, stream, time_input, annotate): steps(iterable)", loop_new, loop_dealloc,
          loop_traverse, loop_clear, loop_methods);
  loop_type.tp_flags |= Py_TPFLAGS_HAVE_FINALIZE;
  loop_type.tp_finalize = loop_finalize;
  loop_type.tp_iter = PyObject_SelfIter;
  loop_type.tp_iternext = loop_next;

  if (PyType_Ready(&loop_type) < 0) throw py::error_already_set();
  m.attr("StepLoop") = py::handle(reinterpret_cast<PyObject*>(&loop_type));
  m.def(
      "set_loop_watched", [](bool on) { watched = on; }, py::arg("on"));
}

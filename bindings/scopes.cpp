// steptrace._core's step and set-aside scopes as CPython types, with no pybind11 dispatch on the
// hot path: StepScope (a step's context manager), ExcludeScope (exclude(name)'s) and StepCall (a
// tracer's step(): with no argument, outside an event loop, it is the tracer's StepScope). Nothing
// here allocates per step. See bindings/README.md, "Python's hot path".
#include <pybind11/pybind11.h>

#include "glue.hpp"
#include "register.hpp"
#include "steptrace/steptrace.hpp"

namespace py = pybind11;
using namespace steptrace;
using namespace steptrace::bindings;

namespace {

PyObject* str_asyncio = nullptr;           // "asyncio"
PyObject* str_get_running_loop = nullptr;  // "_get_running_loop"

// Whether this thread runs an asyncio event loop now (then step() is the task's, which the Python
// path gives). asyncio is never imported here: without it no loop runs. -1 with an error set.
int in_event_loop() {
  static PyObject* running_loop = nullptr;  // asyncio._get_running_loop, kept once found
  if (running_loop == nullptr) {
    PyObject* asyncio = PyDict_GetItemWithError(PyImport_GetModuleDict(), str_asyncio);
    if (asyncio == nullptr) return PyErr_Occurred() ? -1 : 0;
    running_loop = PyObject_GetAttr(asyncio, str_get_running_loop);
    if (running_loop == nullptr) return -1;
  }
  PyObject* loop = PyObject_CallNoArgs(running_loop);
  if (loop == nullptr) return -1;
  Py_DECREF(loop);
  return loop != Py_None;
}

// ---- StepScope and ExcludeScope. They keep no per-use state (the open step and the time set
// aside belong to the thread), so one object serves every `with` on every thread.

struct scope_obj {
  PyObject_HEAD tracer* t;
  PyObject* owner;  // the Tracer object, kept alive while this scope is
  phase_id id;      // ExcludeScope: the name the time is set aside under
  bool on_stream;   // StepScope: timed on the device too
  void* stream;     // with on_stream: a CUDA stream handle (nullptr: the default stream)
};

scope_obj* make_scope(PyTypeObject* type, PyObject* owner) {
  tracer* t = tracer_of(owner);
  if (t == nullptr) return nullptr;
  auto* self = reinterpret_cast<scope_obj*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  Py_INCREF(owner);
  self->t = t;
  self->owner = owner;
  return self;
}

void scope_dealloc(PyObject* obj) {
  Py_CLEAR(reinterpret_cast<scope_obj*>(obj)->owner);
  Py_TYPE(obj)->tp_free(obj);
}

PyObject* step_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"tracer", "stream", nullptr};
  PyObject* owner = nullptr;
  PyObject* stream_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:StepScope", const_cast<char**>(names), &owner, &stream_obj)) {
    return nullptr;
  }
  stream_arg stream;
  if (!stream_of(stream_obj, &stream)) return nullptr;
  scope_obj* self = make_scope(type, owner);
  if (self == nullptr) return nullptr;
  self->on_stream = stream.has_value();
  self->stream = stream_ptr(stream);
  return reinterpret_cast<PyObject*>(self);
}

PyObject* step_enter(PyObject* obj, PyObject*) {
  auto* s = reinterpret_cast<scope_obj*>(obj);
  const stream_arg stream = s->on_stream ? stream_arg{reinterpret_cast<std::uintptr_t>(s->stream)} : stream_arg{};
  if (!open_step(*s->t, stream)) return nullptr;
  Py_RETURN_NONE;
}

// __exit__(type, value, traceback): a step left by an exception counts as failed.
PyObject* step_exit(PyObject* obj, PyObject* const* args, Py_ssize_t nargs) {
  reinterpret_cast<scope_obj*>(obj)->t->end_step(nargs > 0 && args[0] != Py_None);
  Py_RETURN_FALSE;  // never swallow the user's exception
}

PyObject* exclude_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"tracer", "id", nullptr};
  PyObject* owner = nullptr;
  unsigned int id = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OI:ExcludeScope", const_cast<char**>(names), &owner, &id)) {
    return nullptr;
  }
  scope_obj* self = make_scope(type, owner);
  if (self != nullptr) self->id = phase_id{id};
  return reinterpret_cast<PyObject*>(self);
}

PyObject* exclude_enter(PyObject* obj, PyObject*) {
  auto* s = reinterpret_cast<scope_obj*>(obj);
  s->t->begin_exclude(s->id);
  Py_RETURN_NONE;
}

PyObject* exclude_exit(PyObject* obj, PyObject* const*, Py_ssize_t) {
  auto* s = reinterpret_cast<scope_obj*>(obj);
  s->t->end_exclude(s->id);
  Py_RETURN_FALSE;
}

PyCFunction fastcall(PyObject* (*fn)(PyObject*, PyObject* const*, Py_ssize_t)) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fn));
}

PyMethodDef step_methods[] = {{"__enter__", step_enter, METH_NOARGS, nullptr},
                              {"__exit__", fastcall(step_exit), METH_FASTCALL, nullptr},
                              {nullptr, nullptr, 0, nullptr}};
PyMethodDef exclude_methods[] = {{"__enter__", exclude_enter, METH_NOARGS, nullptr},
                                 {"__exit__", fastcall(exclude_exit), METH_FASTCALL, nullptr},
                                 {nullptr, nullptr, 0, nullptr}};

PyTypeObject step_type = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject exclude_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

// ---- StepCall: a tracer's step(fn=None, *, stream=None, batch=None). Called with nothing, on a
// thread that runs no event loop, it is the tracer's StepScope; everything else (a decorated
// function, a stream, a batch, a coroutine's step) takes the Python path.

struct step_call_obj {
  PyObject_HEAD PyObject* scope;  // the tracer's StepScope (a steptrace._tracer.scopes._StepScope)
  PyObject* slow;                 // the Python path: slow(fn=None, *, stream=None, batch=None)
  bool asked;                     // step() was called (the exit report says why a run that asked recorded nothing)
};

PyObject* step_call(PyObject* obj, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  auto* self = reinterpret_cast<step_call_obj*>(obj);
  if (self->scope == nullptr) {  // cleared by the garbage collector: its tracer is going
    PyErr_SetString(PyExc_RuntimeError, "steptrace: this tracer's step() is gone");
    return nullptr;
  }
  self->asked = true;
  if (nargs == 0 && kwnames == nullptr) {
    const int in_loop = in_event_loop();
    if (in_loop < 0) return nullptr;
    if (!in_loop) {
      Py_INCREF(self->scope);
      return self->scope;
    }
  }
  return PyObject_Vectorcall(self->slow, args, static_cast<size_t>(nargs), kwnames);
}

PyObject* step_call_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"scope", "slow", nullptr};
  PyObject* scope = nullptr;
  PyObject* slow = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O:StepCall", const_cast<char**>(names), &step_type, &scope,
                                   &slow)) {
    return nullptr;
  }
  if (!PyCallable_Check(slow)) {
    PyErr_SetString(PyExc_TypeError, "steptrace: StepCall(scope, slow): slow must be callable");
    return nullptr;
  }
  auto* self = reinterpret_cast<step_call_obj*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  Py_INCREF(scope);
  self->scope = scope;
  Py_INCREF(slow);
  self->slow = slow;
  return reinterpret_cast<PyObject*>(self);
}

int step_call_traverse(PyObject* obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<step_call_obj*>(obj);
  Py_VISIT(self->scope);
  Py_VISIT(self->slow);  // a bound method of the Python Tracer, which holds this object
  return 0;
}

int step_call_clear(PyObject* obj) {
  auto* self = reinterpret_cast<step_call_obj*>(obj);
  Py_CLEAR(self->scope);
  Py_CLEAR(self->slow);
  return 0;
}

void step_call_dealloc(PyObject* obj) {
  PyObject_GC_UnTrack(obj);
  step_call_clear(obj);
  Py_TYPE(obj)->tp_free(obj);
}

PyObject* step_call_asked(PyObject* obj, void*) {
  return PyBool_FromLong(reinterpret_cast<step_call_obj*>(obj)->asked);
}

int step_call_set_asked(PyObject* obj, PyObject* value, void*) {
  const int truth = value == nullptr ? 0 : PyObject_IsTrue(value);
  if (truth < 0) return -1;
  reinterpret_cast<step_call_obj*>(obj)->asked = truth != 0;
  return 0;
}

PyMethodDef step_call_methods[] = {
    {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(step_call)), METH_FASTCALL | METH_KEYWORDS,
     "step(fn=None, *, stream=None, batch=None)\n--\n\nOne iteration of your loop, or one request: ``with "
     "steptrace.step():`` or ``@steptrace.step``. help(steptrace.Tracer.step) says the rest."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef step_call_getset[] = {{"asked", step_call_asked, step_call_set_asked, "whether step() was called", nullptr},
                                  {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject step_call_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

void define(PyTypeObject& type, const char* name, Py_ssize_t size, const char* doc) {
  type.tp_name = name;
  type.tp_basicsize = size;
  type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  type.tp_doc = doc;
  type.tp_dealloc = scope_dealloc;
}

}  // namespace

void steptrace::bindings::bind_scopes(py::module_& m) {
  intern_all({{&str_asyncio, "asyncio"}, {&str_get_running_loop, "_get_running_loop"}});

  define(step_type, "steptrace._core.StepScope", sizeof(scope_obj),
         "StepScope(tracer, stream=None): a step's context manager");
  step_type.tp_new = step_new;
  step_type.tp_methods = step_methods;

  define(exclude_type, "steptrace._core.ExcludeScope", sizeof(scope_obj),
         "ExcludeScope(tracer, id): time set aside under a name");
  exclude_type.tp_new = exclude_new;
  exclude_type.tp_methods = exclude_methods;

  gc_type(step_call_type, "steptrace._core.StepCall", sizeof(step_call_obj),
          "StepCall(scope, slow): a tracer's step(); call is step(fn=None, *, stream=None, batch=None)", step_call_new,
          step_call_dealloc, step_call_traverse, step_call_clear, step_call_methods);
  step_call_type.tp_getset = step_call_getset;

  for (PyTypeObject* type : {&step_type, &exclude_type, &step_call_type}) {
    if (PyType_Ready(type) != 0) throw py::error_already_set();
  }
  m.attr("StepScope") = py::handle(reinterpret_cast<PyObject*>(&step_type));
  m.attr("ExcludeScope") = py::handle(reinterpret_cast<PyObject*>(&exclude_type));
  m.attr("StepCall") = py::handle(reinterpret_cast<PyObject*>(&step_call_type));
}

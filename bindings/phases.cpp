// steptrace._core's phases as CPython types, with no pybind11 dispatch on the hot path:
// PhaseScope (a phase's context manager), Phases (a tracer's phase(name): a name met before is one
// dict lookup) and DisabledPhase (what a disabled tracer gives: nothing reaches the core). Nothing
// here allocates per phase. See bindings/README.md, "Python's hot path".
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>

#include "glue.hpp"
#include "register.hpp"
#include "steptrace/steptrace.hpp"
#include "torch_cuda.hpp"

namespace py = pybind11;
using namespace steptrace;
using namespace steptrace::bindings;

namespace {

constexpr Py_ssize_t max_remembered = 8192;  // names built from data must not grow a table forever
// Enters that reached the core (tests: disabled ones never do). Only touched holding the GIL: a
// plain add, no locked instruction on the hot path.
std::uint64_t phases_entered = 0;
bool slow_only = false;  // a forked child: every phase(name) takes the Python path, which says why

// ---- PhaseScope: one object serves every `with` of its phase, on every thread (the open phase
// stack belongs to the thread, or to the asyncio request of the context).

struct phase_obj {
  PyObject_HEAD tracer* t;
  PyObject* owner;  // the Tracer object, kept alive while this scope is
  phase_id id;
  bool on_stream;
  bool entered;  // ever entered: a scope made and never entered was called bare (said at exit)
  void* stream;  // with on_stream: a CUDA stream handle (nullptr: the default stream)
};

PyObject* phase_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"tracer", "id", "stream", nullptr};
  PyObject* owner = nullptr;
  unsigned int id = 0;
  PyObject* stream_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OI|O:PhaseScope", const_cast<char**>(names), &owner, &id,
                                   &stream_obj)) {
    return nullptr;
  }
  tracer* t = tracer_of(owner);
  stream_arg stream;
  if (t == nullptr || !stream_of(stream_obj, &stream)) return nullptr;
  auto* self = reinterpret_cast<phase_obj*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  Py_INCREF(owner);
  self->t = t;
  self->owner = owner;
  self->id = phase_id{id};
  self->on_stream = stream.has_value();
  self->stream = stream_ptr(stream);
  return reinterpret_cast<PyObject*>(self);
}

void phase_dealloc(PyObject* obj) {
  Py_CLEAR(reinterpret_cast<phase_obj*>(obj)->owner);
  Py_TYPE(obj)->tp_free(obj);
}

PyObject* phase_enter(PyObject* obj, PyObject*) {
  auto* p = reinterpret_cast<phase_obj*>(obj);
  request* r = nullptr;
  if (!current_request(*p->t, &r)) return nullptr;
  if (r != nullptr) {
    r->begin_phase(p->id);
  } else if (p->on_stream) {
    p->t->begin_phase(p->id, p->stream);
  } else {
    p->t->begin_phase(p->id);
  }
  ++phases_entered;
  p->entered = true;
  Py_RETURN_NONE;
}

PyObject* phase_exit(PyObject* obj, PyObject* const*, Py_ssize_t) {
  auto* p = reinterpret_cast<phase_obj*>(obj);
  request* r = nullptr;
  if (!current_request(*p->t, &r)) return nullptr;
  if (r != nullptr) {
    r->end_phase(p->id);
  } else if (p->on_stream) {
    p->t->end_phase(p->id, p->stream);
  } else {
    p->t->end_phase(p->id);
  }
  Py_RETURN_FALSE;  // never swallow the user's exception
}

PyMethodDef phase_methods[] = {
    {"__enter__", phase_enter, METH_NOARGS, nullptr},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(phase_exit)), METH_FASTCALL, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyObject* phase_entered(PyObject* obj, void*) { return PyBool_FromLong(reinterpret_cast<phase_obj*>(obj)->entered); }
PyGetSetDef phase_getset[] = {{"entered", phase_entered, nullptr, "whether a `with` ever entered it", nullptr},
                              {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject phase_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

// ---- The no-op a disabled tracer's phase(name) returns. Its __enter__ and __exit__ are plain
// functions on the type, not methods, so a `with` finds and calls them without binding (no
// allocation); a function it decorates is decorated by the real scope, which records once the
// tracer is enabled again.

struct noop_obj {
  PyObject_HEAD PyObject* scope;  // the phase's real scope (a steptrace._tracer.scopes._PhaseScope)
};

PyObject* noop_enter(PyObject*, PyObject*) { Py_RETURN_NONE; }
PyObject* noop_exit(PyObject*, PyObject* const*, Py_ssize_t) { Py_RETURN_FALSE; }  // never swallows the exception
PyMethodDef noop_enter_def = {"__enter__", noop_enter, METH_NOARGS, nullptr};
PyMethodDef noop_exit_def = {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(noop_exit)),
                             METH_FASTCALL, nullptr};

void noop_dealloc(PyObject* obj) {
  Py_CLEAR(reinterpret_cast<noop_obj*>(obj)->scope);
  Py_TYPE(obj)->tp_free(obj);
}

PyObject* noop_call(PyObject* obj, PyObject* args, PyObject* kwargs) {
  return PyObject_Call(reinterpret_cast<noop_obj*>(obj)->scope, args, kwargs);
}

PyTypeObject noop_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

// ---- Phases: a tracer's phase(name). A name seen before, with no stream given and no CUDA
// started by torch, is found in the table (most often in its recent slots); with torch's CUDA on,
// a name seen before on torch's current stream is found in the streamed slots; everything else
// (a new name, a stream given, a forked child) takes the Python path, which remembers new names.

struct phases_obj {
  PyObject_HEAD tracer* t;
  PyObject* owner;  // the Tracer object
  PyObject* slow;   // the Python path: slow(name, stream=None) -> scope
  PyObject* table;  // name -> noop_obj (whose scope is the phase's real scope)
  // The names last found, by the address of their str object: a name written in the code is
  // the same object at every call, so most calls end here without hashing into the table.
  // Each entry holds its name and its table value, so an address is never reused while kept.
  struct recent {
    PyObject* name;
    PyObject* found;
  };
  static constexpr std::size_t recent_slots = 64;
  recent recently[recent_slots];
  // With torch's CUDA on, a phase is timed on torch's current stream: the scopes last found for
  // a name on a stream, by the name's address and the stream's handle (each entry holds its name
  // and scope, as above).
  struct on_stream {
    PyObject* name;
    std::uintptr_t stream;
    PyObject* scope;
  };
  on_stream streamed[recent_slots];
};

std::size_t recent_slot(const PyObject* name) {
  const auto bits = reinterpret_cast<std::uintptr_t>(name);
  return (bits >> 4 ^ bits >> 10) & (phases_obj::recent_slots - 1);
}

// The table's value for `name` (borrowed; nullptr: not there, or an error is set).
PyObject* find(phases_obj* self, PyObject* name) {
  phases_obj::recent& slot = self->recently[recent_slot(name)];
  if (slot.name == name) return slot.found;
  PyObject* found = PyDict_GetItemWithError(self->table, name);
  if (found != nullptr) {
    const phases_obj::recent old = slot;  // let go after the slot holds the new pair
    Py_INCREF(name);
    Py_INCREF(found);
    slot = {name, found};
    Py_XDECREF(old.name);
    Py_XDECREF(old.found);
  }
  return found;
}

// The scope of `name` on torch's current stream (a new reference), found without the Python
// path when it found it before; else the Python path's, kept for next time. nullptr with an
// error set when the Python path failed.
PyObject* streamed_scope(phases_obj* self, PyObject* const* args) {
  PyObject* name = args[0];
  std::uintptr_t stream = 0;
  if (!torch_raw_stream(stream)) return PyObject_Vectorcall(self->slow, args, 1, nullptr);
  phases_obj::on_stream& slot = self->streamed[(recent_slot(name) ^ (stream >> 8)) & (phases_obj::recent_slots - 1)];
  if (slot.name == name && slot.stream == stream) {
    Py_INCREF(slot.scope);
    return slot.scope;
  }
  PyObject* scope = PyObject_Vectorcall(self->slow, args, 1, nullptr);
  if (scope == nullptr) return nullptr;
  const phases_obj::on_stream old = slot;  // let go after the slot holds the new entry
  Py_INCREF(name);
  Py_INCREF(scope);
  slot = {name, stream, scope};
  Py_XDECREF(old.name);
  Py_XDECREF(old.scope);
  return scope;
}

// lookup(name, stream=None): what phase(name, stream) returns. A builtin method, not a callable
// object: CPython calls those without a generic dispatch.
PyObject* phases_lookup(PyObject* obj, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  auto* self = reinterpret_cast<phases_obj*>(obj);
  if (self->table == nullptr) {  // cleared by the garbage collector: its tracer is going
    PyErr_SetString(PyExc_RuntimeError, "steptrace: this tracer's phase table is gone");
    return nullptr;
  }
  if (nargs != 1 || kwnames != nullptr || slow_only || !PyUnicode_CheckExact(args[0])) {
    return PyObject_Vectorcall(self->slow, args, static_cast<size_t>(nargs), kwnames);
  }
  PyObject* found = find(self, args[0]);
  if (found == nullptr) {
    if (PyErr_Occurred()) return nullptr;
    if (!self->t->enabled()) return PyObject_Vectorcall(self->slow, args, static_cast<size_t>(nargs), nullptr);
  } else if (!self->t->enabled()) {  // the one check: a disabled phase is the no-op, and never reaches the core
    Py_INCREF(found);
    return found;
  }
  const int cuda = torch_cuda_may_be_on();
  if (cuda < 0) return nullptr;
  if (cuda) return streamed_scope(self, args);
  if (found == nullptr) return PyObject_Vectorcall(self->slow, args, static_cast<size_t>(nargs), nullptr);
  PyObject* scope = reinterpret_cast<noop_obj*>(found)->scope;
  Py_INCREF(scope);
  return scope;
}

PyObject* phases_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* names[] = {"tracer", "slow", nullptr};
  PyObject* owner = nullptr;
  PyObject* slow = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:Phases", const_cast<char**>(names), &owner, &slow)) {
    return nullptr;
  }
  tracer* t = tracer_of(owner);
  if (t == nullptr) return nullptr;
  if (!PyCallable_Check(slow)) {
    PyErr_SetString(PyExc_TypeError, "steptrace: Phases(tracer, slow): slow must be callable");
    return nullptr;
  }
  PyObject* table = PyDict_New();
  if (table == nullptr) return nullptr;
  auto* self = reinterpret_cast<phases_obj*>(type->tp_alloc(type, 0));
  if (self == nullptr) {
    Py_DECREF(table);
    return nullptr;
  }
  self->t = t;
  Py_INCREF(owner);
  self->owner = owner;
  Py_INCREF(slow);
  self->slow = slow;
  self->table = table;
  return reinterpret_cast<PyObject*>(self);
}

int phases_traverse(PyObject* obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<phases_obj*>(obj);
  Py_VISIT(self->slow);  // a bound method of the Python Tracer, which holds this table
  Py_VISIT(self->table);
  for (const auto& slot : self->recently) Py_VISIT(slot.found);
  for (const auto& slot : self->streamed) Py_VISIT(slot.scope);
  return 0;
}

int phases_clear(PyObject* obj) {
  auto* self = reinterpret_cast<phases_obj*>(obj);
  Py_CLEAR(self->slow);
  Py_CLEAR(self->table);
  for (auto& slot : self->recently) {
    Py_CLEAR(slot.name);
    Py_CLEAR(slot.found);
  }
  for (auto& slot : self->streamed) {
    Py_CLEAR(slot.name);
    Py_CLEAR(slot.scope);
  }
  return 0;
}

void phases_dealloc(PyObject* obj) {
  PyObject_GC_UnTrack(obj);
  phases_clear(obj);
  Py_CLEAR(reinterpret_cast<phases_obj*>(obj)->owner);
  Py_TYPE(obj)->tp_free(obj);
}

// remember(name, scope): later calls with `name` find `scope` without the Python path.
PyObject* phases_remember(PyObject* obj, PyObject* const* args, Py_ssize_t nargs) {
  auto* self = reinterpret_cast<phases_obj*>(obj);
  if (nargs != 2 || !PyUnicode_CheckExact(args[0])) {
    PyErr_SetString(PyExc_TypeError, "steptrace: Phases.remember(name: str, scope)");
    return nullptr;
  }
  if (self->table == nullptr || PyDict_GET_SIZE(self->table) >= max_remembered) Py_RETURN_NONE;
  auto* noop = PyObject_New(noop_obj, &noop_type);
  if (noop == nullptr) return nullptr;
  Py_INCREF(args[1]);
  noop->scope = args[1];
  const int put = PyDict_SetItem(self->table, args[0], reinterpret_cast<PyObject*>(noop));
  Py_DECREF(noop);
  if (put < 0) return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef phases_methods[] = {
    // Named `phase` of a type named SteptracePhases: what torch.compile(fullgraph=True) names when a
    // phase is called inside the compiled code (Dynamo cannot trace a C method), so its error says
    // steptrace's phase rather than an unknown `Phases.lookup`.
    {"phase", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(phases_lookup)), METH_FASTCALL | METH_KEYWORDS,
     "phase(name, stream=None)\n--\n\nA named scope inside a step: ``with steptrace.phase(\"compute\"):`` or "
     "``@steptrace.phase(\"compute\")``. help(steptrace.Tracer.phase) says the rest."},
    {"remember", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(phases_remember)), METH_FASTCALL,
     "remember(name, scope): later phase(name) calls find scope without the Python path"},
    {nullptr, nullptr, 0, nullptr}};

PyTypeObject phases_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

bool ready(PyTypeObject& type) { return PyType_Ready(&type) == 0; }

}  // namespace

void steptrace::bindings::bind_phases(py::module_& m) {
  intern_torch_names();

  phase_type.tp_name = "steptrace._core.PhaseScope";
  phase_type.tp_basicsize = sizeof(phase_obj);
  phase_type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  phase_type.tp_doc = "PhaseScope(tracer, id, stream=None): a phase's context manager";
  phase_type.tp_new = phase_new;
  phase_type.tp_dealloc = phase_dealloc;
  phase_type.tp_methods = phase_methods;
  phase_type.tp_getset = phase_getset;

  noop_type.tp_name = "steptrace._core.DisabledPhase";
  noop_type.tp_basicsize = sizeof(noop_obj);
  noop_type.tp_flags = Py_TPFLAGS_DEFAULT;
  noop_type.tp_doc = "A phase of a disabled tracer: records nothing";
  noop_type.tp_dealloc = noop_dealloc;
  noop_type.tp_call = noop_call;

  gc_type(phases_type, "steptrace._core.SteptracePhases", sizeof(phases_obj),
          "Phases(tracer, slow): a tracer's phase table; its method phase is the tracer's phase(name, stream=None)",
          phases_new, phases_dealloc, phases_traverse, phases_clear, phases_methods);

  for (PyTypeObject* type : {&phase_type, &noop_type, &phases_type}) {
    if (!ready(*type)) throw py::error_already_set();
  }
  // The no-op's __enter__/__exit__: builtin functions (no descriptors) in the type's dict, which a
  // `with` calls as found, unbound: no bound method is made.
  for (PyMethodDef* def : {&noop_enter_def, &noop_exit_def}) {
    PyObject* fn = PyCFunction_New(def, nullptr);
    if (fn == nullptr || PyDict_SetItemString(noop_type.tp_dict, def->ml_name, fn) < 0) throw py::error_already_set();
    Py_DECREF(fn);
  }
  PyType_Modified(&noop_type);

  m.attr("PhaseScope") = py::handle(reinterpret_cast<PyObject*>(&phase_type));
  m.attr("DisabledPhase") = py::handle(reinterpret_cast<PyObject*>(&noop_type));
  m.attr("Phases") = py::handle(reinterpret_cast<PyObject*>(&phases_type));
  m.def("phase_enters", [] { return phases_entered; });
  m.def("phases_take_python_path", [] { slow_only = true; });  // a forked child
}

// steptrace._core.RequestStepScope: a coroutine's step, held in a context variable so that it
// follows its task across awaits; and the request of the current context, which phases and
// set_batch_size look for first (glue.hpp).
#include <pybind11/pybind11.h>

#include "glue.hpp"
#include "register.hpp"
#include "steptrace/steptrace.hpp"

namespace py = pybind11;

namespace steptrace::bindings {

namespace {

// The request of the running asyncio task (or any contextvars context): a step opened by
// RequestStepScope lives in a capsule in this context variable, so it follows its task across
// awaits, and phases opened in that context go into it rather than into the thread's step.
PyObject* request_var = nullptr;
constexpr const char* request_capsule = "steptrace.request";

struct py_request {
  explicit py_request(tracer& t) : owner(&t), r(t) {}
  tracer* owner;
  request r;
  PyObject* token = nullptr;  // resets the context variable when the step ends
};

}  // namespace

bool current_request(const tracer& t, request** out) {
  *out = nullptr;
  PyObject* value = nullptr;
  if (PyContextVar_Get(request_var, nullptr, &value) < 0) return false;
  if (value == nullptr) return true;
  auto* held = static_cast<py_request*>(PyCapsule_GetPointer(value, request_capsule));
  Py_DECREF(value);  // the context still holds it
  if (held == nullptr) return false;
  if (held->owner == &t && held->r.open()) *out = &held->r;
  return true;
}

request* request_here(const tracer& t) {
  request* r = nullptr;
  if (!current_request(t, &r)) throw py::error_already_set();
  return r;
}

namespace {

void open_request(tracer& t) {
  if (request_here(t) != nullptr) {
    PyErr_SetString(step_error,
                    "steptrace: a step is already open in this task; steps do not nest (use "
                    "steptrace.phase() for the inner scope)");
    throw py::error_already_set();
  }
  auto* held = new py_request(t);
  PyObject* capsule = PyCapsule_New(held, request_capsule, [](PyObject* c) {
    delete static_cast<py_request*>(PyCapsule_GetPointer(c, request_capsule));  // never ended: abandoned
  });
  if (capsule == nullptr) {
    delete held;
    throw py::error_already_set();
  }
  held->token = PyContextVar_Set(request_var, capsule);
  Py_DECREF(capsule);
  if (held->token == nullptr) throw py::error_already_set();
}

void close_request(tracer& t, bool failed) {
  PyObject* value = nullptr;
  if (PyContextVar_Get(request_var, nullptr, &value) < 0) throw py::error_already_set();
  if (value == nullptr) return;
  auto* held = static_cast<py_request*>(PyCapsule_GetPointer(value, request_capsule));
  Py_DECREF(value);
  if (held == nullptr) throw py::error_already_set();
  if (held->owner != &t) return;
  held->r.end(failed);
  PyObject* token = held->token;
  held->token = nullptr;
  if (token != nullptr) {
    const int reset = PyContextVar_Reset(request_var, token);
    Py_DECREF(token);
    if (reset < 0) PyErr_Clear();  // ended in another context (a task it was copied to): left set, but ended
  }
}

// A coroutine's step: it keeps no per-use state (a request belongs to its context), so one object
// serves every `with` on every task. The thread's step scope is a C type (scopes.cpp).
struct request_step_scope {
  tracer* t;
};

}  // namespace

void bind_requests(py::module_& m) {
  request_var = PyContextVar_New("steptrace.request", nullptr);
  if (request_var == nullptr) throw py::error_already_set();
  py::class_<request_step_scope>(m, "RequestStepScope")
      .def(py::init([](tracer& t) { return request_step_scope{&t}; }), py::arg("tracer"), py::keep_alive<1, 2>())
      .def("__enter__", [](request_step_scope& s) { open_request(*s.t); })
      .def("__exit__", [](request_step_scope& s, py::handle type, py::handle, py::handle) {
        close_request(*s.t, !type.is_none());
        return false;
      });
}

}  // namespace steptrace::bindings

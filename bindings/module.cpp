// steptrace._core: the C++ tracer as seen from Python. Conversions only; logic lives in C++
// (cpp/) or in the Python package (python/steptrace).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>

#include "steptrace/capture.hpp"
#include "steptrace/profiler_trace.hpp"
#include "steptrace/steptrace.hpp"
#include "glue.hpp"

namespace py = pybind11;
using namespace steptrace;

void bind_files(py::module_& m);      // files.cpp
void bind_phases(py::module_& m);     // phases.cpp
void bind_step_loop(py::module_& m);  // step_loop.cpp
void bind_scopes(py::module_& m);     // scopes.cpp

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

void intern_all(std::initializer_list<std::pair<PyObject**, const char*>> names) {
  for (auto [slot, text] : names) {
    *slot = PyUnicode_InternFromString(text);
    if (*slot == nullptr) throw py::error_already_set();
  }
}

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

}  // namespace steptrace::bindings

namespace {

using namespace steptrace::bindings;

// The binding's throwing forms, for pybind11's functions.
void open_step_or_throw(tracer& t, const stream_arg& stream) {
  if (!open_step(t, stream)) throw py::error_already_set();
}
request* request_here(const tracer& t) {
  request* r = nullptr;
  if (!current_request(t, &r)) throw py::error_already_set();
  return r;
}

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

PYBIND11_MODULE(_core, m) {
  m.doc() = "steptrace core (C++). Use the steptrace package, not this module.";
  step_error = PyErr_NewException("steptrace.StepError", PyExc_RuntimeError, nullptr);
  request_var = PyContextVar_New("steptrace.request", nullptr);
  m.attr("StepError") = py::handle(step_error);

  py::class_<summary>(m, "Summary")
      .def("table", &summary::table)
      .def("json", &summary::json)
      .def("trace", &summary::trace)
      .def("kernels_table", &summary::kernels_table)
      .def("drawn", &summary::drawn, py::arg("steps") = 8)
      .def("prometheus", &summary::prometheus, py::arg("prefix") = "steptrace")
      .def("path_for", &summary::path_for, py::arg("path"))
      .def_property_readonly("label", [](const summary& s) -> py::object {
        if (s.diag.label.empty()) return py::none();
        return py::str(s.diag.label);
      })
      .def_readonly("steps", &summary::steps)
      .def("fact", [](const summary& s, const std::string& key) -> py::object {
        const std::string* v = s.fact(key);
        return v ? py::object(py::str(*v)) : py::object(py::none());
      }, py::arg("key"))
      .def_property_readonly("recorded",  // every step it saw: counted, warm-up and failed
                             [](const summary& s) { return s.steps + s.warmup_steps + s.failed_steps; })
      .def_property_readonly("rank", [](const summary& s) -> py::object {
        if (!s.rank) return py::none();
        return py::int_(s.rank->rank);
      })
      .def_property_readonly("world_size", [](const summary& s) -> py::object {
        if (!s.rank) return py::none();
        return py::int_(s.rank->world_size);
      })
      .def_property_readonly("nccl_exposed_ms", [](const summary& s) -> double {  // per step; 0 without
        return s.gpu ? s.gpu->nccl.exposed_ms_per_step : 0.0;
      })
      .def(  // a copy that says it is rank `rank` of `world_size` (a rank file that does not say)
          "with_rank",
          [](summary s, std::uint32_t rank, std::uint32_t world_size) {
            const std::string* host = s.fact("trace.host");  // a trace's host_name
            s.rank = rank_info{rank, world_size, -1, host ? *host : std::string(), {}};
            return s;
          },
          py::arg("rank"), py::arg("world_size"))
      .def_static("from_json", &summary::from_json, py::arg("text"));

  py::class_<tracer>(m, "Tracer")
      .def(py::init<>())
      .def("configure",
           [](tracer& t, const std::map<std::string, std::string>& options) {
             config c = t.options();
             for (const auto& [key, value] : options) c.set(key, value);
             t.configure(c);
           })
      .def("options",  // text forms, as config::get gives them; Python types them by the table
           [](const tracer& t) {
             const config c = t.options();
             std::map<std::string, std::string> out;
             for (const option_info& o : options_table()) out[o.name] = c.get(o.name);
             return out;
           })
      .def_property_readonly("enabled", &tracer::enabled)
      .def("begin_step", &open_step_or_throw, py::arg("stream") = py::none())
      .def("end_step", &tracer::end_step, py::arg("failed") = false)
      .def("begin_phase", [](tracer& t, std::uint32_t id) { t.begin_phase(phase_id{id}); })
      .def("end_phase", [](tracer& t, std::uint32_t id) { t.end_phase(phase_id{id}); })
      .def("begin_exclude", [](tracer& t, std::uint32_t id) { t.begin_exclude(phase_id{id}); })
      .def("end_exclude", [](tracer& t, std::uint32_t id) { t.end_exclude(phase_id{id}); })
      .def("set_fact", &tracer::set_fact, py::arg("key"), py::arg("value"))
      .def("set_batch_size",
           [](tracer& t, std::uint32_t requests) {
             if (request* r = request_here(t)) return r->set_batch_size(requests);
             t.set_batch_size(requests);
           },
           py::arg("requests"))
      // Without the GIL: a summary may wait for the GPU to finish the steps' last work (up to 1 s).
      .def("summary", &tracer::summary, py::call_guard<py::gil_scoped_release>())
      .def("window", &tracer::window)
      .def("metrics", &tracer::metrics)
      .def("listen_windows", &tracer::listen_windows)
      .def(
          "next_window",  // (summary, step, at_s, slot) or None; waits without the GIL
          [](tracer& t, double timeout_s) -> std::optional<std::tuple<summary, std::uint64_t, double, std::int64_t>> {
            std::optional<live_window> w;
            {
              py::gil_scoped_release unlocked;
              w = t.next_window(timeout_s);
            }
            if (!w) return std::nullopt;
            return std::make_tuple(std::move(w->figures), w->step, w->at_s, w->slot);
          },
          py::arg("timeout_s"))
      .def("stop_listening", &tracer::stop_listening, py::call_guard<py::gil_scoped_release>())
      .def("end_live", &tracer::end_live, py::call_guard<py::gil_scoped_release>())
      .def("open_steps", &tracer::open_steps, py::call_guard<py::gil_scoped_release>())
      .def("count_window_failure", &tracer::count_window_failure)
      .def(
          "note_rank_window",  // straggler: window_straggler's dict or None; the straggler's count as a dict
          [](tracer& t, const py::object& straggler, std::vector<std::uint32_t> late, std::vector<std::uint32_t> missing) {
            std::optional<straggler_info> s;
            if (!straggler.is_none()) {
              s.emplace();
              s->rank = straggler["rank"].cast<std::uint32_t>();
              s->phase = straggler["phase"].cast<std::string>();
            }
            const rank_window_count c = t.note_rank_window(s, std::move(late), std::move(missing));
            py::dict out;
            out["rank"] = c.rank, out["windows"] = c.windows, out["first_window"] = c.first_window;
            out["phase"] = c.phase;
            return out;
          },
          py::arg("straggler"), py::arg("late"), py::arg("missing"))
      .def("capture", &tracer::capture, py::arg("steps") = 0, py::arg("reason") = "on demand: capture()")
      .def("capture_triggers_elsewhere", &tracer::capture_triggers_elsewhere)
      .def("reset", &tracer::reset)
      .def("set_rank",
           [](tracer& t, std::uint32_t rank, std::uint32_t world_size, std::int64_t local_rank, const std::string& host,
              const std::string& started_at) { t.set_rank({rank, world_size, local_rank, host, started_at}); },
           py::arg("rank"), py::arg("world_size"), py::arg("local_rank"), py::arg("host"), py::arg("started_at"))
      .def("exit_report", [](tracer& t) { return t.exit_report(); })
      .def("exit_report",
           [](tracer& t, const tracer::exit_finish& finish) { return t.exit_report(finish); },
           py::arg("finish"));

  py::class_<request_step_scope>(m, "RequestStepScope")
      .def(py::init([](tracer& t) { return request_step_scope{&t}; }), py::arg("tracer"), py::keep_alive<1, 2>())
      .def("__enter__", [](request_step_scope& s) { open_request(*s.t); })
      .def("__exit__", [](request_step_scope& s, py::handle type, py::handle, py::handle) {
        close_request(*s.t, !type.is_none());
        return false;
      });

  m.def("option_table", [] {
    py::list rows;
    for (const option_info& o : options_table()) {
      rows.append(py::make_tuple(o.name, o.env, o.kind, o.default_text, o.doc));
    }
    return rows;
  });
  m.def(
      "combine_ranks",
      [](const std::vector<py::tuple>& reports, std::uint32_t world_size, double timeout_s, bool from_files,
         const std::vector<std::pair<std::uint32_t, std::string>>& refused) {
        std::vector<rank_report> in;  // (summary, waits, collectives[, device_wait_ms])
        for (const py::tuple& r : reports) {
          in.push_back({r[0].cast<summary>(), r[1].cast<std::vector<double>>(), r[2].cast<std::uint64_t>(),
                        r.size() > 3 ? r[3].cast<double>() : 0.0});
        }
        return combine_ranks(in, world_size, timeout_s, from_files, refused);
      },
      py::arg("reports"), py::arg("world_size"), py::arg("timeout_s"), py::arg("from_files") = false,
      py::arg("refused") = std::vector<std::pair<std::uint32_t, std::string>>{});
  m.def("rank_digest", &rank_digest, py::arg("summary"));
  m.def("live_row", &live_row, py::arg("window"));
  m.def(
      "window_straggler",  // a dict, or None
      [](const std::vector<std::string>& rows) -> py::object {
        const std::optional<straggler_info> s = window_straggler(rows);
        if (!s) return py::none();
        py::dict out;
        out["rank"] = s->rank, out["phase"] = s->phase, out["excess_ms"] = s->excess_ms;
        out["own_wait_ms"] = s->own_wait_ms, out["others_wait_ms"] = s->others_wait_ms;
        out["median_rank"] = s->median_rank;
        if (!s->within.empty()) {  // a named phase inside `phase`; its bytes as Python spells names
          PyObject* within = PyUnicode_DecodeUTF8(s->within.data(), static_cast<Py_ssize_t>(s->within.size()),
                                                  "surrogateescape");
          if (within == nullptr) throw py::error_already_set();
          out["within"] = py::reinterpret_steal<py::str>(within);
          out["within_ms"] = s->within_ms;
          const std::string words = straggler_within_words(*s);  // the exit's words, for rank 0's line
          PyObject* said = PyUnicode_DecodeUTF8(words.data(), static_cast<Py_ssize_t>(words.size()), "replace");
          if (said == nullptr) throw py::error_already_set();
          out["within_words"] = py::reinterpret_steal<py::str>(said);
        }
        return std::move(out);
      },
      py::arg("rows"));
  m.def("format_ms", &format_ms, py::arg("ms"));
  py::class_<capture_rule>(m, "CaptureRule")  // capture.hpp: the triggers Python's window thread weighs
      .def(py::init<std::string_view>(), py::arg("spec"))
      .def("weigh", &capture_rule::weigh, py::arg("step_p50_ms"), py::arg("step_p95_ms"), py::arg("label"),
           py::arg("phase_share"))
      .def("cool", &capture_rule::cool, py::arg("windows") = capture_rule::cool_down)
      .def("has", &capture_rule::has, py::arg("trigger"))
      .def_property_readonly("phase", &capture_rule::phase);
  m.attr("CAPTURE_COOL_DOWN") = capture_rule::cool_down;
  m.def(
      "capture_block",  // the capture's lines, from its record as Summary.to_dict() gives it
      [](const py::dict& c) {
        capture_record r;
        r.reason = c["reason"].cast<std::string>();
        r.first_step = c["first_step"].cast<std::uint64_t>();
        r.last_step = c["last_step"].cast<std::uint64_t>();
        r.steps = c["steps"].cast<std::uint64_t>();
        r.rank = c["rank"].cast<std::uint32_t>();
        r.label = c["label"].is_none() ? "" : c["label"].cast<std::string>();
        r.evidence = c["evidence"].cast<std::string>();
        r.advice = c["advice"].cast<std::string>();
        r.path = c["path"].cast<std::string>();
        r.cost_s = c["cost_s"].cast<double>();
        r.tool = c["tool"].cast<std::string>();
        return capture_block(r);
      },
      py::arg("record"));
  m.def("printable_text", &printable_text, py::arg("text"));
  m.attr("LABELS") = diagnosis_labels();
  m.def("suggested_loader_workers", &suggested_loader_workers);
  m.def("default_tracer", &default_tracer, py::return_value_policy::reference);
  m.def("set_gpu_library_dirs", &steptrace::set_gpu_library_dirs, py::arg("dirs"));
  m.def("yield_cupti", &steptrace::yield_cupti, py::arg("holder"));
  m.def("reclaim_cupti", &steptrace::reclaim_cupti);
  m.def("cupti_holder", &steptrace::cupti_holder);
  bind_files(m);       // files.cpp
  bind_phases(m);      // phases.cpp
  bind_step_loop(m);   // step_loop.cpp
  bind_scopes(m);      // scopes.cpp
  m.def("register_phase", [](const std::string& name) { return register_phase(name).value; }, py::arg("name"));
  m.attr("INPUT") = builtin::input.value;
  m.attr("H2D") = builtin::h2d.value;
  m.attr("COMPUTE") = builtin::compute.value;
  m.attr("WAIT") = builtin::wait.value;
  m.attr("COLLECTIVE_PHASE") = std::string(collective_phase);
}

// steptrace._core: the C++ tracer as seen from Python. Conversions only; logic lives in C++
// (cpp/) or in the Python package (python/steptrace). This file registers; each bind_* is defined
// in its own file (register.hpp), and none of them calls back into this one.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "register.hpp"
#include "steptrace/steptrace.hpp"

namespace py = pybind11;
using namespace steptrace;
using namespace steptrace::bindings;

PYBIND11_MODULE(_core, m) {
  m.doc() = "steptrace core (C++). Use the steptrace package, not this module.";
  bind_glue(m);      // glue.cpp: StepError
  bind_tracer(m);    // tracer.cpp: Summary, Tracer
  bind_requests(m);  // requests.cpp: RequestStepScope
  m.def("option_table", [] {
    py::list rows;
    for (const option_info& o : options_table()) {
      rows.append(py::make_tuple(o.name, o.env, o.kind, o.default_text, o.doc));
    }
    return rows;
  });
  bind_ranks(m);  // ranks.cpp
  m.def("format_ms", &format_ms, py::arg("ms"));
  bind_capture(m);  // ranks.cpp
  m.def("printable_text", &printable_text, py::arg("text"));
  m.attr("LABELS") = diagnosis_labels();
  m.def("suggested_loader_workers", &suggested_loader_workers);
  m.def("default_tracer", &default_tracer, py::return_value_policy::reference);
  m.def("set_gpu_library_dirs", &steptrace::set_gpu_library_dirs, py::arg("dirs"));
  m.def("yield_cupti", &steptrace::yield_cupti, py::arg("holder"));
  m.def("reclaim_cupti", &steptrace::reclaim_cupti);
  m.def("cupti_holder", &steptrace::cupti_holder);
  // A child forked while steptrace's capture ran torch.profiler: libkineto's static destructors
  // wait forever there on a condition variable of a thread only the parent has, so the child's
  // exit(), after Python has finished, skips the C++ destructors registered before this call.
  m.def("exit_skips_destructors", [] {
    ::on_exit(
        [](int status, void*) {
          std::fflush(nullptr);
          ::_exit(status);
        },
        nullptr);
  });
  bind_files(m);      // files.cpp
  bind_phases(m);     // phases.cpp
  bind_step_loop(m);  // step_loop.cpp
  bind_scopes(m);     // scopes.cpp
  bind_hangs(m);      // hangs.cpp
  m.def(
      "register_phase", [](const std::string& name) { return register_phase(name).value; }, py::arg("name"));
  m.attr("INPUT") = builtin::input.value;
  m.attr("H2D") = builtin::h2d.value;
  m.attr("COMPUTE") = builtin::compute.value;
  m.attr("WAIT") = builtin::wait.value;
  m.attr("COLLECTIVE_PHASE") = std::string(collective_phase);
}

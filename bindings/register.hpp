// What module.cpp registers: each function adds its part of steptrace._core. module.cpp calls
// them; each is defined in the file named beside it, which calls no other.
#pragma once

#include <pybind11/pybind11.h>

namespace steptrace::bindings {

void bind_glue(pybind11::module_& m);       // glue.cpp: StepError
void bind_tracer(pybind11::module_& m);     // tracer.cpp: Summary, Tracer
void bind_requests(pybind11::module_& m);   // requests.cpp: RequestStepScope
void bind_ranks(pybind11::module_& m);      // ranks.cpp: the ranks' report, live rows, stragglers
void bind_capture(pybind11::module_& m);    // ranks.cpp: the capture rule, a capture's lines
void bind_files(pybind11::module_& m);      // files.cpp
void bind_phases(pybind11::module_& m);     // phases.cpp
void bind_step_loop(pybind11::module_& m);  // step_loop.cpp
void bind_scopes(pybind11::module_& m);     // scopes.cpp
void bind_hangs(pybind11::module_& m);      // hangs.cpp: collective marks, the job's hang, stacks

}  // namespace steptrace::bindings

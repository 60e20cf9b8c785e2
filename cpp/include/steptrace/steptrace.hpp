// steptrace — what is the GPU waiting on?
//
//   #include <steptrace/steptrace.hpp>
//
//   int main() {
//     for (auto& batch : loader) {
//       STEPTRACE_STEP();                                  // one iteration = one step
//       { STEPTRACE_PHASE("input");   prepare(batch); }
//       { STEPTRACE_PHASE("compute"); train(batch); }
//     }
//   }   // at exit the default tracer prints the per-step breakdown and its diagnosis
//
// CMake:  find_package(steptrace CONFIG REQUIRED)
//         target_link_libraries(app PRIVATE steptrace::steptrace)
//
//   step      one iteration of your loop (a training step, or one request in a server)
//   phase     a named scope in a step; every instant goes to the innermost open phase, or to
//             `other` when none is open, so the shares of a step add up to 100%
//   summary   per-phase mean / p50 / p95 / p99 / max / share, a label (INPUT-BOUND, ...) and
//             the fix to try first
#pragma once

#include "steptrace/request.hpp"
#include "steptrace/summary.hpp"
#include "steptrace/tracer.hpp"

// LAUNCH-BOUND's words: the GPU idles in `compute` while the host launches kernels shorter than
// their launches. A graph's replay counts as one launch; a program replaying graphs already is told
// what runs outside them instead of graphs.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analysis/kernel_table.hpp"
#include "report/diagnosis/label_words.hpp"
#include "report/report.hpp"

namespace steptrace::detail {

// "`aten::add_` (410 a step), `aten::mul_` (205)": the three named ops launching the most kernels
// of at most short_kernel_us each (a tie: the one with more device time, the table's order), from
// the kernel table; "" without one.
std::string short_kernel_sources(const summary& s) {
  if (!s.gpu || !s.gpu->kernels) return {};
  std::vector<const op_row*> ops;
  for (const op_row& r : s.gpu->kernels->ops) {
    if (r.short_kernels_per_step >= 1 && !r.name.empty() && r.name.front() != '(') ops.push_back(&r);
  }
  std::stable_sort(ops.begin(), ops.end(), [](const op_row* a, const op_row* b) {
    return a->short_kernels_per_step > b->short_kernels_per_step;
  });
  std::string out;
  for (std::size_t i = 0; i < ops.size() && i < 3; ++i) {
    out += fmt::format("{}`{}` ({:.0f}{})", i ? ", " : "", ops[i]->name, ops[i]->short_kernels_per_step,
                       i ? "" : " a step");
  }
  return out;
}

void launch_bound_words(const label_reading& r, diagnosis& d) {
  const summary& s = r.s;
  const idle_groups& idle = r.idle;
  const double replays = s.gpu->graph_replays_per_step;
  d.evidence = fmt::format(
      "The GPU sat idle {:.1f}% of step time while the host was in `compute`, launching {:.0f} kernels a step with a "
      "median of {:.1f} us (half the kernel time in kernels under {:.1f} us); the host spends {:.1f} us in `compute` "
      "per launch: launch overhead outruns the kernels.",
      100 * idle.compute, s.gpu->kernels_per_step, s.gpu->kernel_median_us, s.gpu->kernel_time_median_us,
      host_us_per_kernel(s));
  d.evidence += graph_replay_words(s);
  const std::string sources = short_kernel_sources(s);
  if (!sources.empty()) {
    d.evidence +=
        fmt::format(" The ops launching the most kernels of at most {:.0f} us: {}.", short_kernel_us, sources);
  }
  d.evidence += r.close;
  const char* graphs = fact_bool(s, "gpu.amd").value_or(false) ? "HIP" : "CUDA";
  const auto captures = fact_int(s, "trace.graph_captures");
  const double eager = host_launches_per_step(s) - replays;
  d.advice = {
      replays > 0 && !(captures && *captures > 0)
          // Replaying graphs already: what runs outside them is what the GPU waits on.
          ? fmt::format(
                "the program already replays {} graphs ({:.0f} a step): the {:.0f} launches a step made outside "
                "them, and the host work before each replay, are what the GPU waits on; capture those ops too "
                "(torch.compile's graph breaks: TORCH_LOGS=graph_breaks), or move that host work off the step",
                graphs, replays, eager)
          : captures && *captures > 0
                // The program records graphs already: the launches left ran outside them (a compiled
                // function's first, eager call before its capture; ops the capture leaves out).
                ? fmt::format(
                      "the program already records {} graphs ({} capture{} set aside): the {:.0f} launches a step "
                      "left ran outside them (a compiled function's eager first call before its capture, or ops "
                      "kept out of the graph); trace the replays to see which remain",
                      graphs, *captures, *captures == 1 ? "" : "s", s.gpu->kernels_per_step)
                : fmt::format(
                      "{} graphs replay a step's {:.0f} launches as one: torch.compile(mode=\"reduce-overhead\"), "
                      "or torch.cuda.graphs around a static-shape step",
                      graphs, s.gpu->kernels_per_step),
      fmt::format("fewer, larger kernels{}: a larger batch, torch.compile (fusion), batched tensor operations "
                  "instead of Python loops over tensors",
                  sources.empty() ? "" : ", starting where the short ones come from (" + sources + ")"),
  };
}

std::string graph_replay_words(const summary& s) {
  const double replays = s.gpu ? s.gpu->graph_replays_per_step : 0.0;
  if (replays <= 0) return "";
  const double graph_kernels = s.gpu->graph_kernels_per_step;
  const double eager = host_launches_per_step(s) - replays;
  return fmt::format(
      " It replays {:.0f} graph{} a step ({:.0f} kernels, each replay one launch) and launches {:.0f} "
      "kernel{} a step outside them.",
      replays, replays == 1 ? "" : "s", graph_kernels, eager, eager == 1 ? "" : "s");
}

}  // namespace steptrace::detail

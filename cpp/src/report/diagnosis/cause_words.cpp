// The words of the causes a trace shows best: the host outside every op (HOST-BOUND), collectives
// no compute hides (COMM-BOUND), launches (LAUNCH-BOUND), one-time initialisation and COMPUTE-BOUND's kernels. Each
// names what it saw: the stretch, the collectives' exposed time, the calls set aside.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analysis/kernel_table.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/gains.hpp"

namespace steptrace::detail {

void host_bound_advice(const summary& s, const cause_shares& c, diagnosis& d) {
  const double longest = fact_double(s, "trace.host_gap_longest_ms").value_or(0);
  const double at = fact_double(s, "trace.host_gap_longest_at_ms").value_or(0);
  const bool first = fact_bool(s, "trace.host_gap_before_device").value_or(false);
  const double gaps = fact_double(s, "trace.host_gaps_per_step").value_or(0);
  const double idle_ms = c.host * s.step_ms.mean;
  // One stretch holding most of that idle time is work on the loop's thread (decoding, I/O,
  // preprocessing); many short ones are the interpreter between ops.
  if (longest > 0 && longest >= 0.5 * idle_ms) {
    d.evidence +=
        fmt::format(" One stretch outside every op holds most of it: {} ms, {}.", format_ms(longest),
                    first ? "before the step's first kernel" : fmt::format("{} ms into the step", format_ms(at)));
    d.advice = {
        fmt::format("move the {} ms of Python {} off the loop's thread: decoding, I/O and preprocessing belong in "
                    "DataLoader workers (or a background thread), tensor transforms on the GPU",
                    format_ms(longest), first ? "before the first kernel" : "outside every op"),
        "keep what runs between steps (tokenising, image processing, pipeline argument handling) off the critical "
        "path: prepare the next input while the GPU runs this one",
    };
  } else {
    d.evidence += fmt::format(
        " It is spread over many short gaps between ops ({:.0f} of 10 us or more a step, the "
        "longest {} ms): per-op Python overhead.",
        gaps, format_ms(longest));
    d.advice = {
        "cut per-op Python overhead: torch.compile fuses the ops and runs them from compiled code; CUDA graphs "
        "(torch.compile(mode=\"reduce-overhead\")) replay them with one launch",
        "larger batches give each op more work per launch; keep Python-side logic (hooks, small tensor math, "
        "argument handling) out of the step",
    };
  }
}

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

void launch_bound_words(const summary& s, const idle_groups& idle, diagnosis& d) {
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

void one_time_evidence(const summary& s, diagnosis& d) {
  for (const set_aside_stats& a : s.set_aside) {
    if (a.name != one_time_phase) continue;
    const std::string* calls = s.fact("trace.one_time_calls");
    d.evidence += fmt::format(
        " Set aside as one-time initialisation, not advised on: {} ms ({}), {:.0f}% of the "
        "trace, work a process does once (context creation, module loading, a JIT's or "
        "compiler's first run).",
        format_ms(a.total_ms), calls ? *calls : "runtime calls that blocked with the device idle", 100 * a.run_share);
    if (const auto captures = fact_int(s, "trace.graph_captures"); captures && *captures > 0) {
      d.evidence += fmt::format(
          " It holds {} graph capture{}: the launches inside record a graph and run nothing on "
          "the GPU, so the GPU's idle time there is no cause; a trace of the graphs' replays shows "
          "the steady state.",
          *captures, *captures == 1 ? "" : "s");
    }
  }
}

std::string idle_custom_in_compute(const summary& s) {
  if (!s.gpu) return "";
  const std::vector<std::string_view> groups = builtin_groups(s);
  for (const auto& [name, share] : s.gpu->idle_by_phase) {  // largest first
    if (share < 0.25) break;
    if (is_builtin(name)) continue;
    for (std::size_t i = 0; i < s.phases.size(); ++i) {
      if (s.phases[i].name == name && (groups[i].empty() || groups[i] == "compute")) {
        return fmt::format(", starting with `{}`: the GPU spends {:.0f}% of its idle time while the host is in it",
                           name, 100 * share);
      }
    }
  }
  return "";
}

void steady_state_advice(const summary& s, const diagnosis_thresholds& t, diagnosis& d) {
  for (const set_aside_stats& a : s.set_aside) {
    if (a.name != one_time_phase || a.run_share < t.start_up_mostly_share) continue;
    d.advice.push_back(
        fmt::format("{:.0f}% of this trace is start-up, set aside: trace the steady state, "
                    "torch.profiler.schedule(wait=N, warmup=1, active=3) past the first iterations, for "
                    "figures that hold",
                    100 * a.run_share));
  }
}

bool start_up_only(const summary& s, const diagnosis_thresholds& t, diagnosis& d) {
  if (s.steps != 1) return false;
  for (const set_aside_stats& a : s.set_aside) {
    if (a.name != one_time_phase || a.run_share < t.start_up_only_share) continue;
    const auto captures = fact_int(s, "trace.graph_captures");
    d.label = "BALANCED";
    d.evidence = fmt::format(
        "This trace is {:.0f}% one-time start-up work{}, set aside; the {} ms left is no basis for "
        "a cause.",
        100 * a.run_share,
        captures && *captures > 0 ? fmt::format(" ({} graph capture{}: launches that record a graph and run nothing)",
                                                *captures, *captures == 1 ? "" : "s")
                                  : std::string(),
        format_ms(s.step_ms.mean));
    one_time_evidence(s, d);
    d.advice = {
        "trace the steady state instead: torch.profiler.schedule(wait=N, warmup=1, active=3) past the first "
        "iterations (or, for a server, its requests after start-up)"};
    d.gains.clear();
    return true;
  }
  return false;
}

// The advice to see the device's side: first where the label's own advice needs it, last where
// the host view proves the cause.
static void place_device_advice(diagnosis& d, std::string advice) {
  if (d.label == "COMPUTE-BOUND" || d.label == "WAIT-HEAVY" || d.label == "BALANCED") {
    d.advice.insert(d.advice.begin(), std::move(advice));
  } else {
    d.advice.push_back(std::move(advice));
  }
}

bool device_unread(const std::string& fact) {
  return fact.size() > 5 && fact.compare(fact.size() - 5, 5, " mtia") == 0;
}

std::string device_unrecorded_words(const std::string& fact) {
  if (fact.rfind("op ", 0) == 0) return fmt::format("`{}`, an op only a GPU runs", fact.substr(3));
  const std::string calls = fact.substr(0, fact.find(' '));
  if (device_unread(fact)) return fmt::format("{} record{} of an MTIA accelerator", calls, calls == "1" ? "" : "s");
  return fmt::format("{} runtime call{} that launch{} kernels or cop{} memory", calls, calls == "1" ? "" : "s",
                     calls == "1" ? "es" : "", calls == "1" ? "ies" : "y");
}

void device_unrecorded_advice(const summary& s, diagnosis& d) {
  if (s.gpu) return;
  const std::string* fact = s.fact("trace.device_unrecorded");
  if (fact == nullptr) return;
  if (device_unread(*fact)) {  // its device was recorded, in records steptrace does not read
    d.evidence += fmt::format(
        " The trace holds {}, a device steptrace does not read (it reads NVIDIA and AMD GPUs): "
        "what the accelerator waited on is unseen.",
        device_unrecorded_words(*fact));
    place_device_advice(d,
                        "read the accelerator's side with a tool that reads its records (HTA reads MTIA traces); "
                        "steptrace's figures here are the host's");
    return;
  }
  const bool cpu_only = fact->rfind("op ", 0) == 0;  // no runtime call either: recorded with the CPU's activity alone
  d.evidence += fmt::format(
      " The host put work on a GPU ({}), but the trace holds none of the GPU's records: what "
      "the GPU waited on is unseen.",
      device_unrecorded_words(*fact));
  std::string advice =
      cpu_only ? "record the GPU's side too: add ProfilerActivity.CUDA to torch.profiler.profile(activities=[...]); "
                 "with the GPU's records steptrace says what the GPU waited on"
               : "record the GPU's activity too: torch.profiler.profile(activities=[ProfilerActivity.CPU, "
                 "ProfilerActivity.CUDA]), without CUPTI's range profiler, which keeps no kernel records; with them "
                 "steptrace says what the GPU waited on";
  place_device_advice(d, std::move(advice));
}

}  // namespace steptrace::detail

namespace steptrace::detail {

std::string compute_target(const summary& s, const diagnosis_thresholds& t) {
  if (!s.gpu || !s.gpu->kernels) return {};
  const kernel_stats& k = *s.gpu->kernels;
  if (k.kinds.empty()) return {};
  // The op holding the most device time, not a catch-all row, nor one whose time is mostly
  // collective kernels: those wait on other ranks' data, no compute to speed up.
  const op_row* op = nullptr;
  for (const op_row& r : k.ops) {
    if (!catch_all_row(r.name) && 2 * r.collective_ms_per_step <= r.ms_per_step) {
      op = &r;
      break;
    }
  }
  // An op holding nearly all of it is the step itself (a range around the whole step, a CUDA
  // graph's replay, a compiled graph's call): naming it says nothing, its heaviest kernel does.
  const kernel_row* kernel = nullptr;
  if (op != nullptr && op->busy_share >= t.whole_step_op_share) {
    op = nullptr;
    for (const kernel_row& r : k.kernels) {
      if (r.kind != "collective" && r.kind != "copy" && r.kind != "memset" && !catch_all_row(r.name)) {
        kernel = &r;
        break;
      }
    }
  }
  const kind_row* kind = &k.kinds.front();  // the kind with the most time, collectives aside
  double collective = 0;
  for (const kind_row& r : k.kinds) {
    if (r.kind == "collective") {
      collective = r.busy_share;
      if (kind == &r && k.kinds.size() > 1) kind = &k.kinds[1];
    }
  }
  const std::string kinds = fmt::format("{} kernels take {:.0f}%", kind->kind, 100 * kind->busy_share);
  // No op or phase to name (every launch unseen, say): the kernels' kinds alone.
  std::string text =
      op != nullptr ? fmt::format("start with `{}`: {:.0f}% of the GPU's time; by kind, {}", op->name,
                                  100 * op->busy_share, kinds)
      : kernel != nullptr
          ? fmt::format(
                "start with the kernel `{}`: {:.0f}% of the GPU's time ({:.0f} calls a step); by "
                "kind, {}",
                clip_name(short_kernel_name(kernel->name), 60), 100 * kernel->busy_share, kernel->calls_per_step, kinds)
          : fmt::format("by kind, {} of the GPU's time", kinds);
  // Collectives that take much of the time yet run beside compute are not what holds the step.
  if (const nccl_stats& c = s.gpu->nccl; collective >= t.collective_note_share && c.ms_per_step > 0) {
    text += fmt::format("; collective kernels take {:.0f}%, {:.0f}% of their time beside compute kernels",
                        100 * collective, 100 * (1 - c.exposed_ms_per_step / c.ms_per_step));
  }
  double matrix = 0;
  for (const kind_row& r : k.kinds) {
    if (r.kind == "gemm" || r.kind == "convolution") matrix += r.busy_share;
  }
  // Matrix work worth moving, mostly off the tensor cores: lower precision would put it there.
  if (matrix >= 0.2 && k.gemm_named_share >= 0.5 && k.gemm_tensor_core_share < 0.5) {
    // Tensor cores before Ampere (Volta, Turing) take fp16 only: no bf16, no TF32.
    const std::string* gpu = s.fact("gpu.name");
    bool fp16_only = false;
    for (const char* older : {"V100", "T4", "TITAN V", "RTX 20", "Quadro RTX"}) {
      fp16_only = fp16_only || (gpu != nullptr && gpu->find(older) != std::string::npos);
    }
    text += fmt::format("; {:.0f}% of the GEMM and convolution time is not on tensor cores: {} would use them",
                        100 * (1 - k.gemm_tensor_core_share),
                        fp16_only ? "fp16 autocast (torch.autocast(\"cuda\", dtype=torch.float16), with a GradScaler)"
                                  : "bf16 autocast, or TF32 (torch.backends.cuda.matmul.allow_tf32 and "
                                    "torch.backends.cudnn.allow_tf32)");
  }
  return text;
}

}  // namespace steptrace::detail

#include "profiler/trace_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string_view>

#include "profiler/host_fill.hpp"
#include "profiler/host_forest.hpp"
#include "profiler/idle_holders.hpp"
#include "profiler/trace_ceiling.hpp"
#include "profiler/trace_collectives.hpp"
#include "profiler/trace_device.hpp"
#include "profiler/trace_facts.hpp"
#include "profiler/trace_kernels.hpp"
#include "profiler/trace_names.hpp"
#include "profiler/trace_phase_names.hpp"
#include "report/diagnosis/summary_facts.hpp"
#include "steptrace/phase.hpp"

namespace steptrace::detail {
namespace {

constexpr std::uint32_t none = trace_phase_names::none;

bool is_host_node(const trace_event& e) {
  return e.cat == event_cat::op || e.cat == event_cat::user_annotation || e.cat == event_cat::runtime;
}
bool is_builtin(std::uint32_t id) {
  return id == builtin::input.value || id == builtin::h2d.value || id == builtin::compute.value ||
         id == builtin::wait.value;
}

class rules {
 public:
  rules(const trace_events& t, const std::string& name, step_window window, const std::string& step_name)
      : t_(t), name_(name), window_(window), step_name_(step_name) {}

  trace_reading run() {
    const step_choice choice = choose_steps(t_, name_, step_name_);
    out_.source = choice.source;
    out_.step_name = choice.source == step_source::named_range ? step_name_ : std::string();
    out_.steps = choice.steps.size();
    out_.steps_dropped = choice.dropped;
    out_.stub_steps = choice.stubs;
    out_.loop = choice.loop;
    out_.warmup = choice.warmup;
    pid_ = choice.pid;
    tid_ = choice.tid;
    device_ = find_device(t_);
    out_.has_device = device_.present;
    std::vector<step_interval> steps = choice.steps;
    if (window_ == step_window::tensorboard_plugin) stretch_to_device_work(t_, device_, pid_, steps);
    windows_ = steps;
    collect_host_nodes();
    if (out_.source == step_source::own_annotations) {
      emit_own();
    } else {
      no_device_ = !device_.present;
      collective_ = register_phase(collective_phase).value;
      categorise_all();
      mark_one_time();
      fill_ = std::make_unique<host_fill>(others_);
      emit_steps();
      holders_ = read_idle_holders(t_, *main_, one_time_, others_, one_time_kind, device_, pid_, windows_);
    }
    release_host();
    collect_device();
    collect_calls();
    note_facts();
    note_gaps();
    note_start();
    out_.custom_phases_folded = names_.folded();
    if (!out_.records.empty()) out_.span = step_interval{out_.records.front().ticks, out_.records.back().ticks};
    return std::move(out_);
  }

 private:
  std::string_view name_of(const trace_event& e) const { return t_.names[e.name]; }

  // A host node of the main pid's forests: the step ranges themselves are not nodes.
  bool is_node(const trace_event& e) const {
    if (e.pid != pid_ || e.tid_negative || !is_host_node(e)) return false;
    const std::string_view n = name_of(e);
    if (out_.source == step_source::own_annotations) {
      return e.tid == tid_ && e.cat == event_cat::user_annotation && starts_with(n, annotation_prefix);
    }
    return !is_profiler_step(n) && !(out_.source == step_source::named_range && e.tid == tid_ && n == step_name_);
  }

  // The main pid's host nodes by thread.
  void collect_host_nodes() {
    auto by_thread = nodes_by_thread(t_.events, [this](const trace_event& e) { return is_node(e); });
    for (auto& [tid, nodes] : by_thread) {
      if (tid == tid_) {
        main_ = std::make_unique<forest>(t_.events, std::move(nodes));
      } else {
        others_.emplace_back(t_.events, std::move(nodes));
      }
      std::vector<std::uint32_t>().swap(nodes);
    }
    if (!main_) main_ = std::make_unique<forest>(t_.events, std::vector<std::uint32_t>{});
  }

  // `main_thread`: without a device view, a collective on another thread is the host waiting for
  // the other ranks.
  std::uint32_t own_phase(const trace_event& e, bool main_thread) {
    const std::string_view n = name_of(e);
    if (e.cat == event_cat::runtime) {
      if (is_sync(n)) return builtin::wait.value;
      if (e.correlation != 0) {
        const auto it = device_.copy_by_correlation.find(e.correlation);
        if (it != device_.copy_by_correlation.end() && it->second == copy_kind::h2d) return builtin::h2d.value;
        if (it != device_.copy_by_correlation.end() && it->second == copy_kind::d2h) return builtin::wait.value;
      }
      return none;
    }
    if (is_input_op(n)) return builtin::input.value;
    if (is_item_op(n)) return builtin::wait.value;
    // A CPU collective blocks the host on the other ranks; an NCCL range only enqueues (compute).
    // Without any device, every collective is a CPU one.
    if (is_cpu_collective(n) || (no_device_ && !main_thread && is_collective(n))) return collective_;
    if (e.cat == event_cat::user_annotation) {
      return starts_with(n, annotation_prefix) ? names_.annotated(n) : names_.custom(n);
    }
    return none;
  }

  void categorise(forest& f, bool main_thread) {
    const std::size_t n = f.size();
    f.own.resize(n);
    f.kind.resize(n);
    for (std::size_t i = 0; i < n; ++i) f.own[i] = own_phase(f.event(i), main_thread);
    // Copy ops take the phase of the copies they launch: children come after their parents.
    enum : std::uint8_t { found_h2d = 1, found_wait = 2, found_collective = 4 };
    std::vector<std::uint8_t> found(n, 0);
    for (std::size_t k = n; k-- > 0;) {
      const trace_event& e = f.event(k);
      if (e.cat == event_cat::runtime && !is_sync(name_of(e))) {
        if (f.own[k] == builtin::h2d.value) found[k] |= found_h2d;
        if (f.own[k] == builtin::wait.value) found[k] |= found_wait;
      }
      if (f.own[k] == collective_) found[k] |= found_collective;
      if (f.own[k] == none && (found[k] & found_collective) && is_collective(name_of(e))) {
        f.own[k] = collective_;  // the c10d op or record_param_comms around a gloo range
      } else if (f.own[k] == none && (found[k] & (found_h2d | found_wait)) && is_copy_op(name_of(e))) {
        f.own[k] = (found[k] & found_wait) ? builtin::wait.value : builtin::h2d.value;
      }
      if (f.parent[k] != forest::npos) found[f.parent[k]] |= found[k];
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t inherited = f.parent[i] != forest::npos ? f.kind[f.parent[i]] : builtin::compute.value;
      f.kind[i] = f.own[i] != none && (is_builtin(f.own[i]) || f.own[i] == collective_) ? f.own[i] : inherited;
    }
  }

  void categorise_all() {
    categorise(*main_, true);
    for (forest& f : others_) categorise(f, false);
  }

  // The host forests are done with once the records are written: freed before the device is read.
  void release_host() {
    main_.reset();
    std::vector<forest>().swap(others_);
    fill_.reset();
    std::vector<std::uint8_t>().swap(one_time_);
  }

  void push(std::uint64_t t, record_kind k, std::uint32_t id) { out_.records.push_back({t, id, k}); }

  // One-time costs (profiler/trace_facts.hpp), set aside as initialisation: on the main thread
  // as they are walked; on another thread (a first launch in autograd's backward) as pieces of
  // the tiling that fills the main thread's gaps.
  void mark_one_time() {
    one_time_.assign(main_->size(), 0);
    if (windows_.empty()) return;
    const std::vector<step_interval>& steps = windows_;
    const start_up_names names = start_up_names_of(t_);
    one_time_found found;
    one_time_ = one_time_costs(t_, *main_, device_, steps, names, true, found);
    for (forest& f : others_) {
      const std::vector<std::uint8_t> marks = one_time_costs(t_, f, device_, steps, names, false, found);
      for (std::size_t i = 0; i < f.size(); ++i) {  // parents come before their children
        if (marks[i] || (f.parent[i] != forest::npos && f.kind[f.parent[i]] == one_time_kind))
          f.kind[i] = one_time_kind;
      }
    }
    if (found.found.empty()) return;
    one_time_id_ = register_phase(one_time_phase).value;
    out_.facts.emplace_back("trace.one_time_calls", one_time_said(std::move(found.found)));
    if (found.captures != 0) out_.facts.emplace_back("trace.graph_captures", std::to_string(found.captures));
  }

  void note_start() {
    if (windows_.size() <= out_.warmup_steps) return;
    const step_interval first = windows_[out_.warmup_steps];
    start_facts(t_, pid_, out_.device, {first.begin, first.end}, out_.facts);
  }

  void note_gaps() {
    if (!device_.present) return;
    const std::size_t from = out_.warmup_steps < gaps_.size() ? out_.warmup_steps : 0;
    host_gap_facts(std::vector<host_gaps>(gaps_.begin() + static_cast<std::ptrdiff_t>(from), gaps_.end()), out_.device,
                   out_.facts);
  }

  // A phase from another thread's tiling: a collective sits inside `wait`.
  void push_filled(std::uint64_t a, std::uint64_t b, std::uint32_t phase) {
    if (phase == one_time_kind) {  // another thread's one-time cost: set aside
      push(a, record_kind::exclude_begin, one_time_id_);
      push(b, record_kind::exclude_end, one_time_id_);
      return;
    }
    if (phase == collective_) push(a, record_kind::phase_begin, builtin::wait.value);
    push(a, record_kind::phase_begin, phase);
    push(b, record_kind::phase_end, phase);
    if (phase == collective_) push(b, record_kind::phase_end, builtin::wait.value);
  }

  // Main-thread time in [x, y) with no node open: the other threads' phases, else `other` (the
  // host running Python outside every op: its stretches are kept for the diagnosis).
  void emit_gap(std::uint64_t x, std::uint64_t y) {
    if (y <= x) return;
    std::uint64_t at = x;
    fill_->within(x, y, [&](std::uint64_t a, std::uint64_t b, std::uint32_t phase) {
      note_other(at, a);
      push_filled(a, b, phase);
      at = b;
    });
    note_other(at, y);
  }

  // A stretch of `other` in the current step.
  void note_other(std::uint64_t a, std::uint64_t b) {
    if (b <= a || gaps_.empty()) return;
    host_gaps& g = gaps_.back();
    if (b - a >= min_gap_ns) ++g.count;
    if (b - a > g.longest) {
      g.longest = b - a;
      g.longest_begin = a;
    }
  }

  void emit_steps() {
    const forest& f = *main_;
    std::vector<std::uint32_t> emitted;  // the phases open, innermost last
    std::vector<std::uint8_t> pushed(f.size(), 0);
    for (const step_interval& w : windows_) {
      const std::uint64_t a = w.begin, b = w.end;
      gaps_.push_back({a, 0, 0, 0});
      push(a, record_kind::step_begin, 0);
      auto first = std::lower_bound(f.roots.begin(), f.roots.end(), a,
                                    [&](std::uint32_t r, std::uint64_t t) { return f.end[r] <= t; });
      std::uint64_t at = a;
      for (auto r = first; r != f.roots.end() && f.begin(*r) < b; ++r) {
        emit_gap(at, std::max(f.begin(*r), a));
        f.walk(
            *r,
            [&](std::uint32_t i) {
              const std::uint64_t lo = std::max(f.begin(i), a), hi = std::min(f.end[i], b);
              if (hi <= lo) return false;
              std::uint8_t n = 0;
              auto open = [&](std::uint32_t id) {
                push(lo, record_kind::phase_begin, id);
                emitted.push_back(id);
                ++n;
              };
              if (one_time_[i]) {  // set aside whole: its time is in no step
                push(lo, record_kind::exclude_begin, one_time_id_);
                pushed[i] = set_aside_mark;
                return true;
              }
              const std::uint32_t own = f.own[i];
              const std::uint32_t top = emitted.empty() ? none : emitted.back();
              if (own == collective_ && top != builtin::wait.value && top != collective_) {
                open(builtin::wait.value);
              } else if (own != none && !is_builtin(own) && emitted.empty()) {
                open(builtin::compute.value);
              }
              if (own != none && own != top) {
                open(own);
              } else if (own == none && emitted.empty()) {
                open(builtin::compute.value);
              }
              pushed[i] = n;
              return true;
            },
            [&](std::uint32_t i) {
              const std::uint64_t hi = std::min(f.end[i], b);
              if (pushed[i] == set_aside_mark) {
                push(hi, record_kind::exclude_end, one_time_id_);  // hi > lo: the walk entered it
                return;
              }
              for (std::uint8_t k = 0; k < pushed[i]; ++k) {
                push(hi, record_kind::phase_end, emitted.back());
                emitted.pop_back();
              }
            });
        at = std::min(f.end[*r], b);
      }
      emit_gap(at, b);
      push(b, record_kind::step_end, 0);
    }
  }

  // steptrace's own annotations: the records the live path wrote, rebuilt from their ranges.
  void emit_own() {
    const forest& f = *main_;
    std::vector<std::uint32_t> ids(f.size(), none);
    for (std::uint32_t i = 0; i < f.size(); ++i) ids[i] = names_.annotated(name_of(f.event(i)));
    for (std::uint32_t r : f.roots) {
      f.walk(
          r,
          [&](std::uint32_t i) {
            if (name_of(f.event(i)) == own_step_name) {
              push(f.begin(i), record_kind::step_begin, 0);
            } else if (ids[i] != none) {
              push(f.begin(i), record_kind::phase_begin, ids[i]);
            }
            return true;
          },
          [&](std::uint32_t i) {
            if (name_of(f.event(i)) == own_step_name) {
              push(f.end[i], record_kind::step_end, 0);
            } else if (ids[i] != none) {
              push(f.end[i], record_kind::phase_end, ids[i]);
            }
          });
    }
  }

  // The device records, and the evidence for warm-up: the first step's device still busy with
  // work launched before the trace (that span is busy, never idle time of a host phase), or a
  // loop's first iteration holding the program's start-up; the first step is left out when other
  // steps exist.
  void collect_device() {
    const std::vector<step_interval>& steps = windows_;
    device_reading d = read_device(t_, device_, pid_, steps);
    out_.device = std::move(d.records);
    out_.kernels_without_launch = d.kernels_without_launch;
    out_.launched_before = d.kernels_without_launch > 0 || steps_ran_before(t_, pid_, tid_);
    out_.steps_without_device = d.steps_without_device;
    if (const launch_coverage_reading& c = d.coverage; device_.present && c.steps_under_recorded != 0) {
      out_.facts.emplace_back("trace.device_coverage", fmt::format("{} {} {} {}", c.steps_under_recorded,
                                                                   c.steps_weighed, c.launches, c.recorded));
    }
    if (steps.empty()) return;
    std::vector<step_interval> untraced = untraced_busy(t_, device_, pid_, out_.device, steps.front());
    out_.warmup_steps = (!untraced.empty() || out_.loop.first_is_start) && steps.size() > 1 ? 1 : 0;
    out_.warmup_steps = std::max(out_.warmup_steps, out_.warmup.steps);  // the program's own (trace_steps.hpp)
    const std::vector<step_interval> counted(steps.begin() + out_.warmup_steps, steps.end());
    const std::unique_ptr<launch_sites> sites = device_.present ? std::make_unique<launch_sites>(t_, pid_) : nullptr;
    if (sites) out_.kernels = read_kernels(t_, device_, *sites, counted, out_.device);
    out_.ceiling = read_op_ceiling(t_, device_, pid_, counted, sites.get());
    for (const step_interval& s : untraced) out_.untraced_ns += s.end - s.begin;
    const std::size_t from = untraced.empty() || out_.warmup_steps > 0 ? 0 : 1;  // the first: said above
    if (counted.size() >= from + 2) {
      const std::vector<step_interval> weighed(counted.begin() + static_cast<std::ptrdiff_t>(from), counted.end());
      if (std::string late = late_steps(t_, device_, pid_, out_.device, weighed); !late.empty()) {
        out_.facts.emplace_back("trace.device_late", std::move(late));
      }
    }
    out_.untraced = std::move(untraced);
  }

  void collect_calls() {
    trace_calls c = read_collective_calls(t_, device_.pid, pid_, out_.device, out_.records);
    out_.calls = std::move(c.calls);
    out_.calls_numbered = c.numbered;
  }

  void note_facts() {
    setup_facts(t_, pid_, out_.device, out_.facts);
    idle_holder_facts(t_, holders_, windows_, device_, out_.warmup_steps, out_.facts);
    holders_ = idle_holders{};
  }

  const trace_events& t_;
  const std::string& name_;
  step_window window_;
  const std::string& step_name_;
  trace_reading out_;
  std::vector<step_interval> windows_;  // the steps' [begin, end)
  std::uint32_t pid_ = 0, tid_ = 0;
  trace_device device_;
  std::unique_ptr<forest> main_;
  std::vector<forest> others_;
  std::unique_ptr<host_fill> fill_;  // the other threads' phases, read as the main thread's gaps ask
  trace_phase_names names_;          // the phases the trace's ranges name
  bool no_device_ = false;
  std::uint32_t collective_ = none;     // the phase of a CPU collective, inside `wait`
  std::vector<std::uint8_t> one_time_;  // by main-thread node: set aside as initialisation
  std::uint32_t one_time_id_ = none;
  static constexpr std::uint8_t set_aside_mark = 0xff;
  static constexpr std::uint32_t one_time_kind = 0xfffffffeu;  // another thread's one-time cost, in the fill
  std::vector<host_gaps> gaps_;                                // by step
  idle_holders holders_;  // by step: what held the GPU idle (profiler/idle_holders.hpp)
};

}  // namespace

trace_reading apply_trace_rules(const trace_events& t, const std::string& name, step_window window,
                                const std::string& step_name) {
  return rules(t, name, window, step_name).run();
}

}  // namespace steptrace::detail

#include "profiler/trace_rules.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "profiler/host_forest.hpp"
#include "steptrace/phase.hpp"

namespace steptrace::detail {
namespace {

constexpr std::uint32_t none = 0xffffffffu;
constexpr std::size_t max_custom_phases = 64;  // record_function names a trace may add as phases

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.substr(s.size() - p.size()) == p; }

bool is_step_name(std::string_view n) { return starts_with(n, "ProfilerStep#"); }
bool is_sync(std::string_view n) {
  return n == "cudaStreamSynchronize" || n == "cudaDeviceSynchronize" || n == "cudaEventSynchronize" ||
         n == "cuStreamSynchronize" || n == "cuCtxSynchronize" || n == "cuEventSynchronize";
}
bool is_copy_op(std::string_view n) { return n == "aten::to" || n == "aten::_to_copy" || n == "aten::copy_"; }
bool is_input_op(std::string_view n) {
  return (starts_with(n, "enumerate(DataLoader)#") && ends_with(n, "__next__")) || starts_with(n, "enumerate(DataPipe)#");
}
bool is_host_node(const trace_event& e) {
  return e.cat == event_cat::op || e.cat == event_cat::user_annotation || e.cat == event_cat::runtime;
}
bool is_builtin(std::uint32_t id) {
  return id == builtin::input.value || id == builtin::h2d.value || id == builtin::compute.value ||
         id == builtin::wait.value;
}

copy_kind copy_of(std::string_view name) {
  if (name.find("HtoD") != std::string_view::npos) return copy_kind::h2d;
  if (name.find("DtoH") != std::string_view::npos) return copy_kind::d2h;
  if (name.find("DtoD") != std::string_view::npos) return copy_kind::d2d;
  return copy_kind::other;
}

class rules {
 public:
  rules(const trace_events& t, const std::string& name, step_window window) : t_(t), name_(name), window_(window) {}

  trace_reading run() {
    find_steps();
    find_device();
    for (const trace_event* s : steps_) windows_.push_back({s->ts, s->ts + s->dur, 0});
    if (window_ == step_window::tensorboard_plugin) stretch_windows();
    collect_host_nodes();
    if (out_.own_annotations) {
      emit_own();
    } else {
      categorise_all();
      build_fill();
      emit_steps();
    }
    collect_device();
    note_facts();
    return std::move(out_);
  }

 private:
  struct segment {
    std::uint64_t begin, end;
    std::uint32_t phase;
  };

  std::string_view name_of(const trace_event& e) const { return t_.names[e.name]; }

  void find_steps() {
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> own, profiler;
    const std::string own_step = std::string(annotation_prefix) + "step";
    for (const trace_event& e : t_.events) {
      if (e.cat == event_cat::user_annotation && name_of(e) == own_step) ++own[{e.pid, e.tid}];
      if ((e.cat == event_cat::op || e.cat == event_cat::user_annotation) && is_step_name(name_of(e))) {
        ++profiler[{e.pid, e.tid}];
      }
    }
    out_.own_annotations = !own.empty();
    const auto& counts = out_.own_annotations ? own : profiler;
    if (counts.empty()) {
      throw std::invalid_argument(name_ +
                                  ": no steps: the trace has no ProfilerStep#N ranges (record with "
                                  "torch.profiler.profile(schedule=...) and call prof.step() every iteration)");
    }
    auto best = counts.begin();
    for (auto it = counts.begin(); it != counts.end(); ++it) {
      if (it->second > best->second) best = it;
    }
    pid_ = best->first.first;
    tid_ = best->first.second;
    for (const trace_event& e : t_.events) {
      if (e.pid != pid_ || e.tid != tid_) continue;
      const bool step = out_.own_annotations ? e.cat == event_cat::user_annotation && name_of(e) == own_step
                                             : (e.cat == event_cat::op || e.cat == event_cat::user_annotation) &&
                                                   is_step_name(name_of(e));
      if (step) steps_.push_back(&e);
    }
    std::stable_sort(steps_.begin(), steps_.end(), [](const trace_event* a, const trace_event* b) { return a->ts < b->ts; });
    std::vector<const trace_event*> kept;  // a step nested in or overlapping an earlier one is dropped
    for (const trace_event* s : steps_) {
      if (kept.empty() || s->ts >= kept.back()->ts + kept.back()->dur) kept.push_back(s);
    }
    steps_ = std::move(kept);
    out_.steps = steps_.size();
  }

  void find_device() {
    std::map<std::uint32_t, std::uint64_t> kernels;
    for (const trace_event& e : t_.events) {
      if (e.cat == event_cat::kernel) ++kernels[e.pid];
    }
    for (const auto& [pid, n] : kernels) {
      if (!out_.has_device || n > kernels[device_pid_]) device_pid_ = pid;
      out_.has_device = true;
    }
    for (const trace_event& e : t_.events) {
      if (out_.has_device && e.pid == device_pid_ && e.cat == event_cat::memcpy && e.correlation != 0) {
        copy_by_correlation_[e.correlation] = copy_of(name_of(e));
      }
    }
  }

  // The plugin's windows: each step ends where the device work launched inside it ends (if
  // later), and starts where the step before ended (if later).
  void stretch_windows() {
    std::unordered_map<std::uint64_t, std::uint64_t> device_end;  // by correlation
    for (const trace_event& e : t_.events) {
      if (out_.has_device && e.pid == device_pid_ && e.correlation != 0 &&
          (e.cat == event_cat::kernel || e.cat == event_cat::memcpy || e.cat == event_cat::memset)) {
        auto& end = device_end[e.correlation];
        end = std::max(end, e.ts + e.dur);
      }
    }
    std::vector<std::uint64_t> launched_end(windows_.size(), 0);
    for (const trace_event& e : t_.events) {
      if (e.pid != pid_ || e.cat != event_cat::runtime || e.correlation == 0) continue;
      const auto d = device_end.find(e.correlation);
      if (d == device_end.end()) continue;
      auto w = std::upper_bound(windows_.begin(), windows_.end(), e.ts,
                                [](std::uint64_t t, const segment& x) { return t < x.begin; });
      if (w == windows_.begin()) continue;
      --w;
      if (e.ts + e.dur <= w->end) {
        auto& end = launched_end[static_cast<std::size_t>(w - windows_.begin())];
        end = std::max(end, d->second);
      }
    }
    std::uint64_t previous_end = windows_.front().begin;
    for (std::size_t i = 0; i < windows_.size(); ++i) {
      windows_[i].begin = std::max(previous_end, windows_[i].begin);
      windows_[i].end = std::max({windows_[i].end, launched_end[i], windows_[i].begin});
      previous_end = windows_[i].end;
    }
  }

  void collect_host_nodes() {
    const std::string own_step = std::string(annotation_prefix) + "step";
    std::map<std::uint32_t, std::vector<const trace_event*>> by_thread;
    for (const trace_event& e : t_.events) {
      if (e.pid != pid_ || e.tid_negative || !is_host_node(e)) continue;
      const std::string_view n = name_of(e);
      if (out_.own_annotations) {
        if (e.tid == tid_ && e.cat == event_cat::user_annotation && starts_with(n, annotation_prefix)) {
          by_thread[e.tid].push_back(&e);
        }
        continue;
      }
      if (is_step_name(n)) continue;
      by_thread[e.tid].push_back(&e);
    }
    for (auto& [tid, nodes] : by_thread) {
      if (tid == tid_) {
        main_ = std::make_unique<forest>(std::move(nodes));
      } else {
        others_.emplace_back(std::move(nodes));
      }
    }
    if (!main_) main_ = std::make_unique<forest>(std::vector<const trace_event*>{});
  }

  std::uint32_t custom_phase(std::string_view n) {
    const auto it = custom_.find(std::string(n));
    if (it != custom_.end()) return it->second;
    if (custom_.size() >= max_custom_phases) {
      ++out_.custom_phases_folded;
      return none;
    }
    std::uint32_t id = none;
    try {
      id = register_phase(n).value;
    } catch (const std::invalid_argument&) {  // the registry is full: the time stays in its parent
      ++out_.custom_phases_folded;
    }
    custom_.emplace(std::string(n), id);
    return id;
  }

  std::uint32_t own_phase(const trace_event& e) {
    const std::string_view n = name_of(e);
    if (e.cat == event_cat::runtime) {
      if (is_sync(n)) return builtin::wait.value;
      if (e.correlation != 0) {
        const auto it = copy_by_correlation_.find(e.correlation);
        if (it != copy_by_correlation_.end() && it->second == copy_kind::h2d) return builtin::h2d.value;
        if (it != copy_by_correlation_.end() && it->second == copy_kind::d2h) return builtin::wait.value;
      }
      return none;
    }
    if (is_input_op(n)) return builtin::input.value;
    if (n == "aten::item" || n == "aten::_local_scalar_dense") return builtin::wait.value;
    if (e.cat == event_cat::user_annotation) {
      return starts_with(n, annotation_prefix) ? annotated_phase(n) : custom_phase(n);
    }
    return none;
  }

  // `steptrace:<phase>`: the phase steptrace recorded (none for `steptrace:step`).
  std::uint32_t annotated_phase(std::string_view n) {
    const std::string_view phase = n.substr(std::string_view(annotation_prefix).size());
    if (phase == "step") return none;
    if (phase == "input") return builtin::input.value;
    if (phase == "h2d") return builtin::h2d.value;
    if (phase == "compute") return builtin::compute.value;
    if (phase == "wait") return builtin::wait.value;
    return custom_phase(phase);
  }

  void categorise(forest& f) {
    const std::size_t n = f.node.size();
    f.own.resize(n);
    f.kind.resize(n);
    for (std::size_t i = 0; i < n; ++i) f.own[i] = own_phase(*f.node[i]);
    // Copy ops take the phase of the copies they launch: children come after their parents.
    enum : std::uint8_t { found_h2d = 1, found_wait = 2 };
    std::vector<std::uint8_t> found(n, 0);
    for (std::size_t k = n; k-- > 0;) {
      const trace_event& e = *f.node[k];
      if (e.cat == event_cat::runtime && !is_sync(name_of(e))) {
        if (f.own[k] == builtin::h2d.value) found[k] |= found_h2d;
        if (f.own[k] == builtin::wait.value) found[k] |= found_wait;
      }
      if (f.own[k] == none && found[k] != 0 && is_copy_op(name_of(e))) {
        f.own[k] = (found[k] & found_wait) ? builtin::wait.value : builtin::h2d.value;
      }
      if (f.parent[k] != forest::npos) found[f.parent[k]] |= found[k];
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t inherited = f.parent[i] != forest::npos ? f.kind[f.parent[i]] : builtin::compute.value;
      f.kind[i] = f.own[i] != none && is_builtin(f.own[i]) ? f.own[i] : inherited;
    }
  }

  void categorise_all() {
    categorise(*main_);
    for (forest& f : others_) categorise(f);
  }

  // The other threads' innermost phases as one tiling of the time any of them covers: where
  // two overlap, the one that started first keeps its time.
  void build_fill() {
    std::vector<segment> all;
    for (const forest& f : others_) {
      for (std::uint32_t r : f.roots) {
        std::uint64_t cursor = 0;
        std::vector<std::uint32_t> open;
        auto piece = [&](std::uint64_t a, std::uint64_t b, std::uint32_t p) {
          if (b > a) all.push_back({a, b, p});
        };
        f.walk(
            r,
            [&](std::uint32_t i) {
              if (!open.empty()) piece(cursor, f.begin[i], f.kind[open.back()]);
              cursor = f.begin[i];
              open.push_back(i);
              return true;
            },
            [&](std::uint32_t i) {
              piece(cursor, f.end[i], f.kind[i]);
              cursor = f.end[i];
              open.pop_back();
            });
      }
    }
    std::sort(all.begin(), all.end(), [](const segment& a, const segment& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end != b.end ? a.end < b.end : a.phase < b.phase;
    });
    std::uint64_t covered = 0;
    for (const segment& s : all) {
      if (s.end <= covered) continue;
      fill_.push_back({std::max(s.begin, covered), s.end, s.phase});
      covered = s.end;
    }
  }

  void push(std::uint64_t t, record_kind k, std::uint32_t id) { out_.records.push_back({t, id, k}); }

  // Main-thread time in [x, y) with no node open: the other threads' phases, else `other`.
  void emit_gap(std::uint64_t x, std::uint64_t y) {
    if (y <= x) return;
    auto it = std::lower_bound(fill_.begin(), fill_.end(), x, [](const segment& s, std::uint64_t t) { return s.end <= t; });
    for (; it != fill_.end() && it->begin < y; ++it) {
      push(std::max(it->begin, x), record_kind::phase_begin, it->phase);
      push(std::min(it->end, y), record_kind::phase_end, it->phase);
    }
  }

  void emit_steps() {
    const forest& f = *main_;
    std::vector<std::uint32_t> emitted;     // the phases open, innermost last
    std::vector<std::uint8_t> pushed(f.node.size(), 0);
    for (const segment& w : windows_) {
      const std::uint64_t a = w.begin, b = w.end;
      push(a, record_kind::step_begin, 0);
      auto first = std::lower_bound(f.roots.begin(), f.roots.end(), a,
                                    [&](std::uint32_t r, std::uint64_t t) { return f.end[r] <= t; });
      std::uint64_t at = a;
      for (auto r = first; r != f.roots.end() && f.begin[*r] < b; ++r) {
        emit_gap(at, std::max(f.begin[*r], a));
        f.walk(
            *r,
            [&](std::uint32_t i) {
              const std::uint64_t lo = std::max(f.begin[i], a), hi = std::min(f.end[i], b);
              if (hi <= lo) return false;
              std::uint8_t n = 0;
              auto open = [&](std::uint32_t id) {
                push(lo, record_kind::phase_begin, id);
                emitted.push_back(id);
                ++n;
              };
              const std::uint32_t own = f.own[i];
              const std::uint32_t top = emitted.empty() ? none : emitted.back();
              if (own != none && !is_builtin(own) && emitted.empty()) open(builtin::compute.value);
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
    const std::string own_step = std::string(annotation_prefix) + "step";
    std::vector<std::uint32_t> ids(f.node.size(), none);
    for (std::uint32_t i = 0; i < f.node.size(); ++i) ids[i] = annotated_phase(name_of(*f.node[i]));
    for (std::uint32_t r : f.roots) {
      f.walk(
          r,
          [&](std::uint32_t i) {
            if (name_of(*f.node[i]) == own_step) {
              push(f.begin[i], record_kind::step_begin, 0);
            } else if (ids[i] != none) {
              push(f.begin[i], record_kind::phase_begin, ids[i]);
            }
            return true;
          },
          [&](std::uint32_t i) {
            if (name_of(*f.node[i]) == own_step) {
              push(f.end[i], record_kind::step_end, 0);
            } else if (ids[i] != none) {
              push(f.end[i], record_kind::phase_end, ids[i]);
            }
          });
    }
  }

  void collect_device() {
    std::unordered_set<std::uint64_t> launched;
    for (const trace_event& e : t_.events) {
      if (e.pid == pid_ && e.cat == event_cat::runtime) {
        if (e.correlation != 0) launched.insert(e.correlation);
        if (is_sync(name_of(e))) {
          device_record r;
          r.kind = device_activity::sync;
          r.start = e.ts;
          r.end = e.ts + e.dur;
          out_.device.push_back(r);
        }
      }
    }
    for (const trace_event& e : t_.events) {
      if (!out_.has_device || e.pid != device_pid_) continue;
      device_record r;
      switch (e.cat) {
        case event_cat::kernel: r.kind = device_activity::kernel; break;
        case event_cat::memcpy: r.kind = device_activity::memcpy; break;
        case event_cat::memset: r.kind = device_activity::memset; break;
        default: continue;
      }
      const std::string_view n = name_of(e);
      if (r.kind == device_activity::memcpy) {
        r.copy = copy_of(n);
        r.pageable = n.find("Pageable") != std::string_view::npos;
      }
      r.nccl = r.kind == device_activity::kernel && starts_with(n, "nccl");
      r.device = e.device;
      r.context = e.context;
      r.stream = e.stream;
      r.start = e.ts;
      r.end = e.ts + e.dur;
      r.bytes = e.bytes;
      out_.device.push_back(r);
      if (r.kind == device_activity::kernel && (e.correlation == 0 || launched.count(e.correlation) == 0)) {
        ++out_.kernels_without_launch;
      }
    }
    std::stable_sort(out_.device.begin(), out_.device.end(),
                     [](const device_record& a, const device_record& b) { return a.start < b.start; });
    // Steps in which the device did nothing at all (no record starts or runs in them).
    std::vector<std::uint64_t> starts;
    std::uint64_t reach = 0;
    std::vector<std::uint64_t> reach_by;  // the latest end among records up to each
    for (const device_record& r : out_.device) {
      if (r.kind == device_activity::sync) continue;
      starts.push_back(r.start);
      reach = std::max(reach, r.end);
      reach_by.push_back(reach);
    }
    for (const segment& w : windows_) {
      const std::uint64_t a = w.begin, b = w.end;
      const auto k = std::lower_bound(starts.begin(), starts.end(), b) - starts.begin();
      if (k == 0 || reach_by[static_cast<std::size_t>(k) - 1] <= a) ++out_.steps_without_device;
    }
  }

  void note_facts() {
    bool single = false, multi = false;
    for (const trace_event& e : t_.events) {
      if (e.pid != pid_ || !(e.cat == event_cat::op || e.cat == event_cat::user_annotation)) continue;
      const std::string_view n = name_of(e);
      if (!is_input_op(n)) continue;
      single = single || n.find("_SingleProcessDataLoaderIter") != std::string_view::npos;
      multi = multi || n.find("_MultiProcessingDataLoaderIter") != std::string_view::npos;
    }
    if (single && !multi) out_.facts.emplace_back("dataloader.num_workers", "0");
    if (multi && !single) out_.facts.emplace_back("dataloader.multiprocessing", "1");
    if (out_.has_device) {
      std::uint32_t device = 0;
      for (const device_record& r : out_.device) {
        if (r.kind == device_activity::kernel) {
          device = r.device;
          break;
        }
      }
      if (device < t_.gpu_names.size() && !t_.gpu_names[device].empty()) {
        out_.facts.emplace_back("gpu.name", t_.gpu_names[device]);
      }
    }
  }

  const trace_events& t_;
  const std::string& name_;
  step_window window_;
  trace_reading out_;
  std::vector<segment> windows_;  // the steps' [begin, end); `phase` unused
  std::uint32_t pid_ = 0, tid_ = 0, device_pid_ = 0;
  std::vector<const trace_event*> steps_;
  std::unordered_map<std::uint64_t, copy_kind> copy_by_correlation_;
  std::unique_ptr<forest> main_;
  std::vector<forest> others_;
  std::vector<segment> fill_;
  std::unordered_map<std::string, std::uint32_t> custom_;
};

}  // namespace

trace_reading apply_trace_rules(const trace_events& t, const std::string& name, step_window window) {
  return rules(t, name, window).run();
}

}  // namespace steptrace::detail

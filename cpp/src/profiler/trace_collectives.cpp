// A trace's collective calls (profiler/trace_collectives.hpp).
#include "profiler/trace_collectives.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "profiler/trace_names.hpp"
#include "record/collective_kernels.hpp"
#include "steptrace/phase.hpp"

namespace steptrace::detail {
namespace {

struct found {
  collective_call call;
  std::uint64_t launched = 0;  // host time the call was reached (ns)
  std::uint64_t start = 0;     // ns, for the order
};

// Phases a call's `before` never names: the waits for the others themselves.
bool is_waiting(std::uint32_t id, std::uint32_t collective) {
  return id == builtin::wait.value || id == builtin::other.value || id == collective;
}

// Each call's `before`, from the main thread's records (in order of ticks), the calls sorted by
// launch time: the innermost phase open at its launch, or one that ended inside it since (DDP's
// all-reduce launched after the user's `backward` closed, `compute` still open, is after
// `backward`); with none open, the last that ended in the step.
void name_befores(std::vector<found>& calls, const std::vector<record>& records) {
  std::sort(calls.begin(), calls.end(), [](const found& a, const found& b) { return a.launched < b.launched; });
  const std::uint32_t collective = register_phase(collective_phase).value;
  struct opened {
    std::uint32_t id;
    std::size_t at;  // the record that opened it
  };
  std::vector<opened> open;
  std::uint32_t ended = no_event;  // the last phase that ended, in this step
  std::size_t ended_at = 0, ended_depth = 0;
  std::size_t at = 0;
  for (found& f : calls) {
    for (; at < records.size() && records[at].ticks <= f.launched; ++at) {
      const record& r = records[at];
      if (r.kind == record_kind::step_begin) {
        open.clear();
        ended = no_event;
      } else if (r.kind == record_kind::phase_begin) {
        open.push_back({r.id, at});
      } else if (r.kind == record_kind::phase_end && !open.empty()) {
        if (!is_waiting(open.back().id, collective)) ended = open.back().id, ended_at = at, ended_depth = open.size();
        open.pop_back();
      }
    }
    std::uint32_t id = ended;
    for (std::size_t i = open.size(); i-- > 0;) {
      if (is_waiting(open[i].id, collective)) continue;
      const bool child_ended = ended != no_event && ended_depth > i + 1 && ended_at > open[i].at;
      id = child_ended ? ended : open[i].id;
      break;
    }
    if (id != no_event) f.call.before = phase_label(phase_id{id});
  }
}

}  // namespace

trace_calls read_collective_calls(const trace_events& t, std::uint32_t device_pid, std::uint32_t pid,
                                  const std::vector<device_record>& device, const std::vector<record>& records) {
  std::unordered_map<std::uint64_t, std::uint64_t> launched;  // a collective kernel's launch, by correlation
  for (const device_record& r : device) {
    if (r.kind == device_activity::kernel && r.nccl && r.correlation != 0) launched.emplace(r.correlation, r.launched);
  }
  std::vector<found> calls;
  bool numbered = true, kernels = false;
  for (const trace_event& e : t.events) {
    if (e.cat != event_cat::kernel || e.pid != device_pid || !is_collective_kernel(t.names[e.name])) continue;
    kernels = true;
    const activity_args& a = t.args_of(e);
    found f;
    f.call.group = a.group != 0 ? t.names[a.group] : "stream " + std::to_string(a.stream);
    f.call.kind = std::string(collective_type(t.names[e.name]));
    f.call.seq = a.seq;
    numbered = numbered && a.seq != activity_args::no_seq;
    f.call.start_us = static_cast<double>(e.ts) / 1e3;
    f.call.end_us = static_cast<double>(e.ts + e.dur) / 1e3;
    const auto l = launched.find(e.correlation);
    f.launched = l != launched.end() && l->second != 0 ? l->second : e.ts;
    f.start = e.ts;
    calls.push_back(std::move(f));
  }
  if (!kernels) {  // a CPU backend: the host's own collective ranges are the calls
    numbered = false;
    for (const trace_event& e : t.events) {
      if (e.pid != pid || e.cat != event_cat::user_annotation || !is_cpu_collective(t.names[e.name])) continue;
      found f;
      f.call.group = "";
      f.call.kind = std::string(collective_type(t.names[e.name]));
      f.call.start_us = static_cast<double>(e.ts) / 1e3;
      f.call.end_us = static_cast<double>(e.ts + e.dur) / 1e3;
      f.launched = f.start = e.ts;
      calls.push_back(std::move(f));
    }
  }
  trace_calls out;
  if (calls.empty()) return out;
  name_befores(calls, records);
  std::stable_sort(calls.begin(), calls.end(), [](const found& a, const found& b) { return a.start < b.start; });
  if (!numbered) {  // each group's calls numbered in order
    std::map<std::string, std::uint64_t> next;
    for (found& f : calls) f.call.seq = next[f.call.group]++;
  }
  out.numbered = numbered;
  for (found& f : calls) out.calls.push_back(std::move(f.call));
  return out;
}

}  // namespace steptrace::detail

// WAIT-HEAVY's evidence, and its fixes as checked hypotheses (report/diagnosis/hypotheses.hpp): blocked or untraced
// time is per-step syncs only when the typical step carries it; one step in N carrying it is
// periodic work; some steps at no period are a case for capture; threads that take turns are a
// shared lock. Each is worded in the program's terms (Python or C++, a loop or a server).
#include <fmt/format.h>

#include <algorithm>

#include "report/diagnosis/hypotheses.hpp"
#include "report/diagnosis/label_words.hpp"
#include "report/diagnosis/step_spread.hpp"
#include "report/diagnosis/summary_facts.hpp"
#include "steptrace/output.hpp"

namespace steptrace::detail {
namespace {

struct option {
  hypothesis h;
  std::vector<std::string> words;
};

// The part of a group's gain the typical step carries: the phase's median step against its mean.
// `judged` is false when the spread cannot be told (few steps, the phase not in the run).
double typical_part(const summary& s, std::string_view group, double gain, bool& judged, std::string& said) {
  const step_spread sp = spread_of(s, group);
  const phase_stats* p = s.phase(group);
  if (sp.shape == step_spread::unknown || p == nullptr || p->ms.mean <= 0) {
    judged = false;
    return gain;
  }
  const double frac = std::min(1.0, p->ms.p50 / p->ms.mean);
  said += fmt::format("{}{} ms {} (its mean {} ms)", said.empty() ? "" : " and ", format_ms(p->ms.p50),
                      group == "other" ? "outside every phase" : fmt::format("in `{}`", group), format_ms(p->ms.mean));
  return gain * frac;
}

std::vector<std::string> per_step_words(const summary& s, bool periodic_holds, bool mostly_other) {
  if (is_server_run(s)) return {};  // a server's wait advice is its own (server_advice.cpp)
  // A framework's loop: the time between its steps is its own work, in its own knobs.
  if (const std::string framework = between_steps_words(s); mostly_other && !framework.empty()) return {framework};
  if (!python_program(s)) {
    return {
        "find the blocking call each step makes in `wait`: a device sync (cudaStreamSynchronize, "
        "cudaDeviceSynchronize, a cudaMemcpy to the host), a lock, a queue, blocking I/O; make it asynchronous "
        "or take it off the step"};
  }
  std::vector<std::string> words = {
      "remove per-step host syncs: .item(), .cpu(), printing the loss every step; log every N steps"};
  if (!periodic_holds) {
    words.push_back(
        "run checkpointing, validation and logging less often; where they belong in the loop, wrap them in "
        "exclude(\"validation\") (Python) / scoped_exclude (C++) so they are set aside and reported apart");
  }
  return words;
}

std::string lock_words(const summary& s, const shared_lock& lock) {
  const std::string unit = is_server_run(s) ? "request" : "step";
  if (python_program(s)) {
    return fmt::format(
        "the threads take turns: the GIL or a shared lock serialises them (`{}` holds {:.0f}% of each {}): move the "
        "work to processes or to code that releases the GIL, or hold the lock for less",
        lock.phase, 100 * lock.h.gain, unit);
  }
  return fmt::format(
      "the threads take turns on a shared lock or resource (`{}` holds {:.0f}% of each {}): hold it for less (copy "
      "out, then work unlocked), split it (per shard or per thread), or give the queue more consumers",
      lock.phase, 100 * lock.h.gain, unit);
}

}  // namespace

void wait_hypotheses(const summary& s, const diagnosis_thresholds& t, diagnosis& d, std::optional<double>& first_gain) {
  const bool trace = from_trace(s);
  const double wait_gain = host_gain(s, "wait"), other_gain = trace ? 0.0 : host_gain(s, "other");
  const double total = wait_gain + other_gain;
  bool judged = true;
  std::string said;
  double typical = 0;
  if (wait_gain > 0) typical += typical_part(s, "wait", wait_gain, judged, said);
  if (other_gain > 0) typical += typical_part(s, "other", other_gain, judged, said);
  std::vector<option> options;
  {  // first: at an equal gain, threads taking turns explain blocked time better than a call in each
    const shared_lock lock = shared_lock_of(s, t);
    option o;
    o.h = lock.h;
    if (lock.h.holds) o.words = {lock_words(s, lock)};
    options.push_back(std::move(o));
  }
  bool periodic_holds = false;
  for (const periodic_work& p : d.periodic) {
    if (p.phase != "wait" && p.phase != "other") continue;
    periodic_holds = true;
    option o;
    o.h = {"periodic work", periodic_cause(p), true,
           fmt::format("1 step in {} carries {} ms more {} than the typical step", p.every, format_ms(p.excess_ms),
                       p.phase == "other" ? "outside every phase" : "in `wait`"),
           periodic_gain(s, p)};
    o.words = {periodic_words(s, p)};
    options.push_back(std::move(o));
  }
  {
    option o;
    const bool holds = !judged || typical >= 0.5 * total || typical >= t.secondary_other_share;
    o.h = {python_program(s) ? "per-step host syncs" : "a blocking call every step",
           wait_gain >= other_gain ? "wait" : "other", holds,
           !judged ? "too few kept steps to tell how the blocked time falls on steps; taken as every step's"
           : holds ? fmt::format("the typical step carries it: {}", said)
                   : fmt::format("refuted: the typical step spends only {}; a few steps carry the rest", said),
           typical};
    o.words = per_step_words(s, periodic_holds, other_gain > wait_gain);
    options.push_back(std::move(o));
  }
  double heavy = std::max(0.0, total - typical);
  for (const option& o : options) heavy -= o.h.fix == "periodic work" ? o.h.gain : 0.0;
  if (judged && !periodic_holds && heavy >= std::max(t.periodic_share, 0.25 * total)) {
    option o;
    o.h = {"some steps only", other_gain > wait_gain ? "other" : "wait", true,
           "some steps carry most of the blocked or untraced time, at no period the kept steps show", heavy};
    o.words = {python_program(s)
                   ? "some steps carry it, at no period: capture=\"slow\" records the next slow step with its ops "
                     "(torch.profiler), or open the slowest steps in the trace (trace_path)"
                   : "some steps carry it, at no period: the capture option (capture = \"slow\") records the next "
                     "slow step, or open the slowest steps in the trace (trace_path)"};
    options.push_back(std::move(o));
  }
  for (const option& o : options) d.hypotheses.push_back(o.h);
  // Threads taking turns explain the blocked time, however it falls on the steps (a lock's waits
  // are long on some steps and none on others): when it holds, it comes first.
  auto rank = [](const option& o) { return !o.h.holds ? 2 : o.h.fix == "a shared lock" ? 0 : 1; };
  std::stable_sort(options.begin(), options.end(), [&](const option& a, const option& b) {
    return rank(a) != rank(b) ? rank(a) < rank(b) : a.h.gain > b.h.gain;
  });
  d.advice.clear();
  for (const option& o : options) {
    if (!o.h.holds || o.words.empty()) continue;
    const bool first = d.advice.empty();
    if (first) first_gain = o.h.gain;
    for (std::size_t i = 0; i < o.words.size(); ++i) {
      d.advice.push_back(o.words[i] + (!first && i == 0 ? gain_words(o.h.gain) : ""));
    }
  }
}

void wait_heavy_words(const label_reading& r, diagnosis& d) {
  const summary& s = r.s;
  const diagnosis_thresholds& t = r.t;
  const cause_shares& c = r.c;
  std::optional<double>& first_gain = r.first_gain;
  const bool device = r.device, trace = from_trace(s), server = is_server_run(s);
  const double wait = group_share(s, "wait"), other = group_share(s, "other");
  const std::string_view blocked =
      server && s.phase(queue_phase) ? "waiting in `queue` or `wait`" : "blocked in `wait`";
  auto device_cause = [&](std::string_view group, double share, double threshold) {
    return device_cause_words(s, group, share, threshold);
  };
  // Blocked time less CPU collectives (COMM-BOUND's); a trace's `other` is Python, not waiting.
  const phase_stats* in_collective = s.phase(collective_phase);
  const double blocked_share = wait - (in_collective ? in_collective->share : 0.0);
  if (trace) {
    d.evidence = device ? device_cause("wait", c.wait, t.device_cause_share) +
                              fmt::format(" The host was {} {:.1f}% of step time.", blocked, 100 * blocked_share)
                        : fmt::format("{:.1f}% of step time is {}; the rule fires at {:.0f}%.", 100 * blocked_share,
                                      blocked, 100 * t.wait_share);
  } else {
    d.evidence =
        device ? device_cause("wait", c.wait, t.device_cause_share) +
                     fmt::format(
                         " The host was {} {:.1f}% and outside every phase (`other`) "
                         "{:.1f}% of step time.",
                         blocked, 100 * blocked_share, 100 * other)
               : fmt::format(
                     "{:.1f}% of step time is {} ({:.1f}%) or outside every phase "
                     "(`other`, {:.1f}%); the rule fires at {:.0f}%.",
                     100 * (blocked_share + other), blocked, 100 * blocked_share, 100 * other, 100 * t.wait_share);
  }
  if (r.lock_leads) d.evidence = "Threads take turns: " + r.lock.h.premise + ".";
  d.evidence += r.close;
  const std::string* unentered = phases_never_entered(s);
  if (!trace && unentered != nullptr && other > wait) {
    // Phases made and never entered (steptrace.phase("x") without `with`): the step is `other`
    // because nothing was recorded, not because the host waits.
    d.advice = {
        fmt::format("steptrace.phase(...) was made but never entered ({}): write `with "
                    "steptrace.phase(\"name\"):` so its time is the phase's, not `other`",
                    *unentered)};
  } else {
    wait_hypotheses(s, t, d, first_gain);
    const auto lead = std::find_if(d.hypotheses.begin(), d.hypotheses.end(),
                                   [&](const hypothesis& h) { return h.holds && h.gain == first_gain.value_or(-1); });
    if (lead != d.hypotheses.end() && lead->fix != "per-step host syncs" && lead->fix != "a blocking call every step" &&
        !r.lock_leads) {
      d.evidence += " The typical step carries little of it: " + lead->premise + ".";
    }
  }
  if (!trace && (device ? r.idle.other > r.idle.wait : other > wait)) {
    d.advice.push_back("most of it is untraced (`other`): wrap more of the step in phases");
  }
}

}  // namespace steptrace::detail

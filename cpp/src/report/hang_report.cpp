// A hang's words: the report file a process writes when one of its steps has been open past
// `hang_after`, the lines it says on stderr, and what the stuck phase usually means. See
// cpp/src/report/README.md, "Hangs".
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "report/report.hpp"
#include "steptrace/hang.hpp"
#include "steptrace/summary.hpp"

namespace steptrace {

std::string hang_view::phase() const {
  const open_step_now* s = longest();
  return s == nullptr || s->phases.empty() ? std::string() : s->phases.back().phase;
}

namespace detail {
namespace {

// Each line made printable (names come from the program), the line breaks kept.
std::string printable_lines(const std::string& text) {
  std::string out;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    out += printable_text(std::string_view(text).substr(at, end - at));
    if (end < text.size()) out += '\n';
    at = end + 1;
  }
  return out;
}

}  // namespace

std::string seconds_text(double s) { return s < 10 ? fmt::format("{:.1f} s", s) : fmt::format("{:.0f} s", s); }

std::string stuck_phase_causes(const std::vector<open_phase_now>& phases, bool in_collective) {
  if (in_collective) {
    return "another rank that never arrived, or a rank that took another branch and calls a different collective: "
           "read the job's view, then the stack of the rank that never entered";
  }
  // the innermost built-in phase open says where to look
  for (auto it = phases.rbegin(); it != phases.rend(); ++it) {
    const std::string& p = it->phase;
    if (p == "input") {
      return "a DataLoader worker dead or deadlocked, a filesystem or object store that stopped answering, or a "
             "queue nobody fills: read this process's stack (the fetch it waits in) and its workers'";
    }
    if (p == "wait" || p == "collective") {
      return stuck_phase_causes({}, true);
    }
    if (p == "compute" || p == "h2d") {
      return "a device sync or kernel that never returns, or a lock the program holds: read this process's stack and "
             "the GPU's state (nvidia-smi)";
    }
  }
  return "a lock, a queue or a call that never returns: read this process's stack";
}

std::string hang_lines(const hang_view& v, const std::optional<rank_info>& who) {
  const open_step_now* s = v.longest();
  if (s == nullptr) return {};
  const std::string where = who ? fmt::format("rank {} ", who->rank) : std::string();
  std::string out = fmt::format("steptrace: {}hang suspected: step {} has been open {} (hang_after {})", where, s->step,
                                seconds_text(s->open_s), seconds_text(v.hang_after_s));
  if (!s->phases.empty()) {
    out += fmt::format(", in `{}` for {}", s->phases.back().phase, seconds_text(s->phases.back().open_s));
  }
  out += "\n";
  if (!v.collectives.empty()) {
    const collective_mark& c = v.collectives.front();
    out += fmt::format("steptrace:   its last collective: {} #{} of group {}, entered {} ago, {}\n", c.kind, c.seq,
                       c.group, seconds_text(c.entered_s),
                       c.left_s < 0 ? "not left" : "left " + seconds_text(c.left_s) + " ago");
  }
  const bool inside =
      std::any_of(v.collectives.begin(), v.collectives.end(), [](const collective_mark& c) { return c.left_s < 0; });
  out += "steptrace:   usual causes: " + stuck_phase_causes(s->phases, inside) + "\n";
  if (!v.report.empty()) out += "steptrace:   report: " + v.report + "\n";
  return printable_lines(out);
}

std::string hang_report_text(const hang_view& v, const std::optional<rank_info>& who, std::string_view stacks,
                             std::string_view job) {
  std::string out = "steptrace hang report\n\n" + hang_lines(v, who) + "\n";
  if (who)
    out += fmt::format("rank {} of {} (local rank {}), pid {}\n\n", who->rank, who->world_size, who->local_rank,
                       ::getpid());
  out += "Steps open now, longest first (each thread's open phases, outermost first):\n";
  for (const open_step_now& t : v.threads) {
    out += fmt::format("  thread {}: step {} open {}\n", t.thread, t.step, seconds_text(t.open_s));
    std::string indent = "    ";
    for (const open_phase_now& p : t.phases) {
      out += fmt::format("{}`{}` open {}\n", indent, printable_text(p.phase), seconds_text(p.open_s));
      indent += "  ";
    }
  }
  out += "\nThe last collective of each process group (latest first):\n";
  if (v.collectives.empty())
    out += "  none marked (torch.distributed's collectives are marked once steptrace is imported)\n";
  for (const collective_mark& c : v.collectives) {
    out +=
        fmt::format("  group {}: {} #{}, entered {} ago, {}\n", printable_text(c.group), printable_text(c.kind), c.seq,
                    seconds_text(c.entered_s), c.left_s < 0 ? "not left" : "left " + seconds_text(c.left_s) + " ago");
  }
  out += "\nThe last counted steps before it (ms, oldest first):";
  if (v.last_steps_ms.empty()) out += " none";
  for (double ms : v.last_steps_ms) out += " " + format_ms(ms);
  out += "\n";
  if (!job.empty()) out += "\nThe job's view:\n" + std::string(job) + "\n";
  out += "\nEvery thread's stack (as faulthandler writes it):\n";
  out +=
      stacks.empty() ? std::string("  not available (no Python interpreter in this process)\n") : std::string(stacks);
  if (out.back() != '\n') out += '\n';
  return out;
}

}  // namespace detail
}  // namespace steptrace

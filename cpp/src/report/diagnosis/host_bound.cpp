// HOST-BOUND's words (a trace's GPU idle while the host runs Python outside every op): one
// stretch holding most of that time is work on the loop's thread, many short gaps per-op overhead
// (the trace.host_gap_* facts).
#include <fmt/format.h>

#include <string>

#include "report/diagnosis/label_words.hpp"
#include "report/report.hpp"

namespace steptrace::detail {

void host_bound_words(const label_reading& r, diagnosis& d) {
  const summary& s = r.s;
  const cause_shares& c = r.c;
  d.evidence = fmt::format(
                   "The GPU sat idle {:.1f}% of step time while the main thread ran Python outside every op "
                   "(the rule fires at {:.0f}%); the host was blocked in `wait` (syncs, blocking copies) "
                   "{:.1f}% of the step, the GPU idle only {:.1f}% of the step meanwhile.",
                   100 * c.host, 100 * r.t.device_cause_share, 100 * group_share(s, "wait"), 100 * c.wait) +
               r.close;
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

}  // namespace steptrace::detail

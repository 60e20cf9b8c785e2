// The "also:" lines: causes that hold a real share of each step without deciding the label
// (label_words.hpp), each with its gain.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "report/diagnosis/label_words.hpp"

namespace steptrace::detail {

std::vector<finding> secondary_findings(const summary& s, const diagnosis_thresholds& t, const cause_shares& c,
                                        const std::string& label) {
  std::vector<finding> out;
  const bool server = is_server_run(s);
  const double input = c.input, other = c.other;
  if (label != "INPUT-BOUND" && input >= t.secondary_input_share) {
    const std::vector<std::string> loader = server ? std::vector<std::string>{} : input_advice(s, t);
    out.push_back({"input",
                   fmt::format("also: `input` holds {:.0f}% of each {}{}: {}", 100 * input, server ? "request" : "step",
                               fact_int(s, "dataloader.num_workers") == 0L ? " on the training thread" : "",
                               server           ? "read and decode request input off the request path"
                               : loader.empty() ? "see INPUT-BOUND's advice"
                                                : loader.front()),
                   input, false});
  }
  if (from_trace(s) && s.gpu && label != "HOST-BOUND" && other >= t.secondary_other_share) {
    out.push_back({"other",
                   fmt::format("also: the GPU idles {:.0f}% of each step while the host runs Python outside every op: "
                               "see HOST-BOUND's advice (preprocessing off the loop's thread, torch.compile)",
                               100 * other),
                   other, false});
  } else if (const std::string framework = between_steps_words(s);
             !from_trace(s) && label != "WAIT-HEAVY" && other >= t.secondary_other_share && !framework.empty()) {
    out.push_back(
        {"other",
         fmt::format("also: {:.0f}% of each step is outside every phase (`other`): {}", 100 * other, framework), other,
         false});
  } else if (!from_trace(s) && label != "WAIT-HEAVY" && other >= t.secondary_other_share) {
    out.push_back({"other",
                   fmt::format("also: {:.0f}% of each {} is outside every phase (`other`): put the work between "
                               "phases ({}) in a phase, or in exclude() when it is not {}, to see what it costs",
                               100 * other, server ? "request" : "step",
                               server ? "logging, metrics, bookkeeping" : "saving images, metrics, logging",
                               server ? "serving" : "training"),
                   other, false});
  }
  if (label != "COMM-BOUND" && c.comm >= t.secondary_other_share) {
    out.push_back({"comm",
                   fmt::format("also: collectives hold {:.0f}% of each step that no compute hides: overlap them with "
                               "compute ({})",
                               100 * c.comm,
                               inference_run(s) ? "async tensor parallelism, sequence parallelism"
                                                : "DDP bucket_cap_mb, FSDP prefetch"),
                   c.comm, false});
  }
  for (const set_aside_stats& a : s.set_aside) {
    if (a.name == one_time_phase) continue;  // once per process: named in the evidence, never advised on
    if (a.run_share >= t.secondary_set_aside_share) {
      out.push_back({a.name,
                     fmt::format("also: `{}` (set aside) takes {:.0f}% of the run: run it less often, or on fewer "
                                 "batches",
                                 a.name, 100 * a.run_share),
                     a.run_share, true});
    }
  }
  return out;
}

}  // namespace steptrace::detail

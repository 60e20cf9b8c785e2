// Close calls (cpp/src/report/diagnosis/README.md, "Definitions"): a label that leads the cause behind it by
// less than close_call_points of the step says so, and names that cause with its gain.
#include <fmt/format.h>

#include <string>

#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/gains.hpp"

namespace steptrace::detail {
namespace {

// The "also:" words for a runner-up, by its label; its cause key for the gains.
finding runner_up_finding(const summary& s, const ranked_cause& r) {
  const double pct = 100 * r.share;
  const bool server = is_server_run(s);
  const char* step = server ? "request" : "step";
  if (r.label == "INPUT-BOUND") {
    return {"input",
            fmt::format("also: a close call, INPUT-BOUND, {:.0f}% of each {} waiting for input: see its advice "
                        "(DataLoader workers, pinned memory, prefetching)",
                        pct, step),
            r.share, false};
  }
  if (r.label == "H2D-BOUND") {
    return {"h2d",
            fmt::format("also: a close call, H2D-BOUND, {:.0f}% of each {} in host-to-device copies: pinned memory and "
                        "non_blocking=True",
                        pct, step),
            r.share, false};
  }
  if (r.label == "WAIT-HEAVY") {
    return {"wait",
            fmt::format("also: a close call, WAIT-HEAVY, the GPU idles {:.0f}% of each {} while the host blocks: "
                        "remove per-step host syncs (.item(), .cpu())",
                        pct, step),
            r.share, false};
  }
  if (r.label == "HOST-BOUND") {
    return {"other",
            fmt::format("also: a close call, HOST-BOUND, the GPU idles {:.0f}% of each {} while the host runs Python "
                        "outside every op: preprocessing off the loop's thread, torch.compile",
                        pct, step),
            r.share, false};
  }
  if (r.label == "COMM-BOUND") {
    return {"comm",
            fmt::format("also: a close call, COMM-BOUND, collectives hold {:.0f}% of each {} that no compute hides: "
                        "overlap them with compute (DDP bucket_cap_mb, FSDP prefetch)",
                        pct, step),
            r.share, false};
  }
  if (r.label == "LAUNCH-BOUND") {
    return {
        "compute",
        fmt::format(
            "also: a close call, LAUNCH-BOUND, the GPU idles {:.0f}% of each {} while the host launches short kernels: "
            "fewer launches (torch.compile; graphs, mode=\"reduce-overhead\", where the program replays none)",
            pct, step),
        r.share, false};
  }
  return {"compute",
          fmt::format("also: a close call, BALANCED: the GPU idles {:.0f}% of each {} while the host is in `compute`: "
                      "profile its host side (Python overhead, CPU ops)",
                      pct, step),
          r.share, false};
}

}  // namespace

void close_call(const summary& s, const diagnosis_thresholds& t, double lead, const ranked_cause& runner,
                std::vector<finding>& found, diagnosis& d) {
  if (runner.label.empty() || lead >= t.close_call_points || runner.share < t.close_call_min_share) return;
  d.runner_up = std::string(runner.label);
  d.evidence +=
      fmt::format(" A close call: {} is {:.1f} points of the step behind ({:.1f}% of the step{}).", runner.label,
                  100 * std::max(0.0, lead), 100 * runner.share,
                  d.label == "COMPUTE-BOUND" && s.gpu
                      ? fmt::format("; the GPU idles {:.1f}% of the step in all", 100 * (1 - s.gpu->busy_share))
                      : std::string());
  finding f = runner_up_finding(s, runner);
  for (const finding& g : found) {
    if (g.cause == f.cause) return;  // said already under the label, with its gain
  }
  found.push_back(std::move(f));
}

}  // namespace steptrace::detail

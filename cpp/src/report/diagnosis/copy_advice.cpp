// H2D-BOUND's words and advice (cpp/src/report/diagnosis/README.md, "Definitions"): pin what is pageable; copies
// already pinned are hidden under the kernels or made smaller, whichever the device's time says can give more. The gain
// on the first line is added by report/diagnosis/gains.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/gains.hpp"
#include "report/diagnosis/label_words.hpp"
#include "report/diagnosis/summary_facts.hpp"

namespace steptrace::detail {

namespace {

// Many small copies a step: each pays a fixed price, and the batch moves far below the link's rate.
constexpr double small_copies_per_step = 8, small_copy_bytes = 256e3;

// The advice for copies that already come from pinned memory (measured, or the DataLoader said
// so). A copy issued on the compute stream waits behind that stream's kernels, non_blocking or
// not: to hide it, it goes on a second stream, ahead of the step that uses it; it can hide only
// under the kernels' time, so where the copies no kernel hides outlast the kernels, fewer bytes
// come first.
std::vector<std::string> pinned_advice(const summary& s, bool server) {
  const std::string side =
      server ? "copy the next request's inputs on a second stream while this one computes (cudaMemcpyAsync from "
               "pinned memory, then cudaStreamWaitEvent on the compute stream): a copy on the compute stream waits "
               "behind its kernels"
             : "copy the next batch on a side stream while this step computes (with torch.cuda.stream(copy_stream): "
               "batch.to(device, non_blocking=True), then torch.cuda.current_stream().wait_stream(copy_stream)): a "
               "copy on the compute stream waits behind its kernels, non_blocking or not";
  const std::string fewer = server ? "copy fewer bytes: a smaller dtype (uint8, fp16/bf16) converted on the GPU"
                                   : "copy fewer bytes: a smaller dtype (uint8 images normalised on the GPU, bf16 "
                                     "features), or keep data that every step reuses on the GPU";
  const bool measured = s.gpu && s.gpu->h2d.count > 0 && s.step_ms.mean > 0;
  if (!measured) return {"pin_memory is on: " + side, fewer};
  const copy_stats& h2d = s.gpu->h2d;
  const double exposed = h2d.exposed_ms_per_step;
  const double kernels = std::max(0.0, s.gpu->busy_ms.mean - exposed);  // device time with a kernel running
  const std::string pinned = fmt::format("the copies already come from pinned memory ({:.0f}% pageable, {:.1f} GB/s)",
                                         100 * h2d.pageable_share, h2d.gb_per_s);
  const double copies = s.gpu->steps_viewed > 0 ? static_cast<double>(h2d.count) / s.gpu->steps_viewed : 0.0;
  if (copies >= small_copies_per_step && h2d.bytes_per_step < copies * small_copy_bytes) {
    return {fmt::format("fewer, larger copies: {:.0f} copies a step of {:.0f} KB on average ({:.1f} GB/s); move one "
                        "collated batch, not many small tensors",
                        copies, h2d.bytes_per_step / copies / 1e3, h2d.gb_per_s),
            side, fewer};
  }
  if (exposed > kernels) {
    return {fmt::format("{}: {}; they take {:.3f} ms a step that no kernel hides, more than the {:.3f} ms of kernels "
                        "they could hide under",
                        fewer, pinned, exposed, kernels),
            side + gain_words(std::min(exposed, kernels) / s.step_ms.mean)};
  }
  return {side + "; " + pinned, fewer};
}

}  // namespace

std::vector<std::string> copy_advice(const summary& s) {
  const bool server = is_server_run(s);
  const bool measured = s.gpu && s.gpu->h2d.count > 0;
  const auto pin_memory = fact_bool(s, "dataloader.pin_memory");
  std::vector<std::string> advice;
  if (measured && s.gpu->h2d.pageable_share >= 0.5) {
    advice.push_back(fmt::format(
        "{:.0f}% of the copied bytes are pageable: pin them ({}tensor.pin_memory()) so "
        "the copy engine reads them directly",
        100 * s.gpu->h2d.pageable_share,
        server ? "a pinned staging buffer, or " : loader_call(s, loader_setting(s, "pin_memory") + "=True") + ", or "));
  } else if (measured || (!server && pin_memory == true)) {
    advice = pinned_advice(s, server);
  } else if (server) {
    advice.push_back("copy requests from pinned host buffers (tensor.pin_memory(), or a pinned staging buffer)");
  } else if (pin_memory == false) {
    advice.push_back(fmt::format("{}: set {}=True so copies go straight to the device",
                                 loader_call(s, loader_setting(s, "pin_memory") + "=False"),
                                 loader_setting(s, "pin_memory")));
  } else {
    advice.push_back(loader_call(s, loader_setting(s, "pin_memory") + "=True") +
                     ": copies from pinned memory go straight to the device");
  }
  if (advice.size() == 1) {  // pinning first: then the host need not wait for the copy
    advice.push_back("tensor.to(device, non_blocking=True) from pinned memory lets the host run on during the copy");
  }
  if (advice.front().rfind("fewer, larger", 0) != 0) {
    advice.push_back("fewer, larger copies: move one collated batch, not many small tensors");
  }
  return advice;
}

}  // namespace steptrace::detail

namespace steptrace::detail {

void h2d_bound_words(const label_reading& r, diagnosis& d) {
  const summary& s = r.s;
  const double copying = r.c.h2d - r.idle.h2d;  // copies the compute units waited through
  if (r.device && copying > 0.005) {
    d.evidence = fmt::format(
        "The GPU computed nothing {:.1f}% of step time for host-to-device copies: idle {:.1f}% while the host was "
        "in `h2d`, and copying with no kernel running {:.1f}% (the rule fires at {:.0f}%).",
        100 * r.c.h2d, 100 * r.idle.h2d, 100 * copying, 100 * r.t.device_cause_share);
  } else {
    d.evidence = r.device ? device_cause_words(s, "h2d", r.idle.h2d, r.t.device_cause_share) + idle_evidence(s, "h2d")
                          : phase_evidence(s, "h2d", r.t.h2d_share);
  }
  if (s.gpu && s.gpu->h2d.count > 0) {
    d.evidence += fmt::format(" {:.0f}% of the bytes copied to the device came from pageable memory.",
                              100 * s.gpu->h2d.pageable_share);
  }
  d.evidence += r.close;
  d.advice = copy_advice(s);
}

}  // namespace steptrace::detail

// The diagnosis of a server run: requests (request.hpp, asyncio steps) and batches. Its label
// comes from the same rules as any run (a request's `queue` counts toward `wait`), worded for
// requests there, with the training-loop advice left out; this file adds what batching and the
// request path show.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "report/diagnosis/diagnosis.hpp"

namespace steptrace::detail {
namespace {

// A phase that prepares a request's input on its own path, by its name.
bool is_preprocessing(std::string_view name) {
  for (std::string_view word : {"preprocess", "decode", "tokeniz", "parse", "deserial", "resize"}) {
    if (name.find(word) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

void advise_server(const summary& s, const diagnosis_thresholds& t, diagnosis& d) {
  std::vector<std::string> advice;
  const phase_stats* queue = s.phase(queue_phase);
  const double queued = queue ? queue->share : 0.0;
  if (queued >= t.queue_share) {
    d.evidence += fmt::format(" Requests wait in `{}` {:.1f}% of their time (p50 {:.2f} ms)", queue_phase, 100 * queued,
                              queue->ms.p50);
    if (s.batches && s.batches->busy_share < t.worker_busy_share) {
      d.evidence += fmt::format(
          " while the batch worker is busy only {:.0f}% of the time: they wait for a batch to "
          "form, not for the worker.",
          100 * s.batches->busy_share);
      advice.push_back(
          "start a batch as soon as the worker is free: lower the batching delay (max wait), or run "
          "batches back to back with whatever has arrived");
    } else if (s.batches) {
      d.evidence += fmt::format(" and the batch worker is busy {:.0f}% of the time: it is the bottleneck.",
                                100 * s.batches->busy_share);
      advice.push_back(
          fmt::format("the batch worker is saturated (p50 batch {:.0f} requests, {:.2f} ms): larger "
                      "batches where the device has room, a faster model, or a second worker",
                      s.batches->size_p50, s.batches->ms.p50));
    } else {
      d.evidence += ".";
      advice.push_back("add workers to the stage the requests queue for, or make it faster");
    }
  } else if (s.batches && 2 * s.batches->size_p50 <= s.batches->size_max) {
    advice.push_back(
        fmt::format("batches hold p50 {:.0f} requests of the {:.0f} seen at most: a little batching "
                    "delay fills them, for more requests per batch at the same cost",
                    s.batches->size_p50, s.batches->size_max));
  }
  for (const phase_stats& p : s.phases) {
    if (p.share >= t.preprocess_share && is_preprocessing(p.name)) {
      advice.push_back(
          fmt::format("`{}` takes {:.0f}% of each request on its own path: run it in a pool ahead of "
                      "the queue, overlapped with the batch before it, or on the device",
                      p.name, 100 * p.share));
    }
  }
  for (std::string& a : d.advice) advice.push_back(std::move(a));  // worded for a server where it was written
  if (d.label == "WAIT-HEAVY" && queued < t.queue_share) {
    advice.push_back("remove blocking calls on the request path (device syncs, synchronous I/O); await them");
  }
  if (d.label == "INPUT-BOUND")
    advice.push_back("read and decode request input off the request path (a pool, or asynchronously)");
  d.advice = std::move(advice);
}

}  // namespace steptrace::detail

// What the retroactive capture's ring (analysis/back_ring.hpp, capture_back) holds and costs:
// bytes per kept step for a training step of 1,000 kernels (its device records, 256 kept) and
// for an inference server's 64 threads of phase calls, the ring's whole size after many windows
// against its bound, and the collector's time per step to keep them, beside the flight
// recorder's (the timeline's) in the same run. Steps are built by hand, as the collector gets them.
//   bench_back_ring [steps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "analysis/back_ring.hpp"
#include "analysis/device_view.hpp"
#include "analysis/flight_recorder.hpp"

using namespace steptrace::detail;

namespace {

std::uint64_t same(std::uint64_t t) { return t; }

struct step_parts {
  std::vector<phase_slice> phases;
  std::vector<host_segment> segments;
  std::vector<stream_key> streams;
  std::vector<phase_span> spans;
};

// A step of `calls` phase calls (ids 1-4 in turn, 10 us each) on `thread` from `begin` (ns).
step_parts parts_of(std::uint32_t calls, std::uint64_t begin) {
  step_parts p;
  for (std::uint32_t id = 1; id <= 4; ++id)
    p.phases.push_back({id, calls * 2'500ull, calls / 4, calls * 2'500ull, phase_slice::no_parent});
  p.streams.push_back({1, 7});
  for (std::uint32_t i = 0; i < calls && i < 256; ++i)
    p.spans.push_back({begin + i * 10'000ull, begin + (i + 1) * 10'000ull, 1 + i % 4, 0});
  return p;
}

struct figures {
  double bytes_per_step = 0, ns_per_step = 0;
  std::uint64_t ring_bytes = 0;
};

// `threads` threads, `steps` steps each, `calls` phase calls and `kernels` kernels a step; a live
// window closes every `per_window` steps.
template <class Keeper>
figures run(Keeper& keep, std::uint32_t threads, std::uint32_t steps, std::uint32_t calls, std::uint32_t kernels,
            std::uint32_t per_window) {
  device_join join;
  std::uint64_t t = 1'000'000;
  double fed_ns = 0;
  for (std::uint32_t s = 0; s < steps; ++s) {
    const std::uint64_t length = 2'000'000 + (s * 7919u % 13) * 100'000;  // 2-3.2 ms, varied: the heaps turn over
    if (kernels > 0) {
      std::vector<device_record> records(kernels);
      for (std::uint32_t k = 0; k < kernels; ++k) {
        records[k].context = 1;
        records[k].stream = 7;
        records[k].start = t + k * (length / kernels);
        records[k].end = records[k].start + length / kernels / 2;
      }
      join.add_records(std::move(records));
    }
    for (std::uint32_t th = 0; th < threads; ++th) {
      step_parts p = parts_of(calls, t);
      const built_step b{t,
                         t + length,
                         0,
                         false,
                         false,
                         s == 0,
                         th,
                         s,
                         p.phases,
                         p.segments,
                         p.streams,
                         p.spans,
                         calls > 256 ? calls - 256 : 0,
                         0,
                         false};
      const auto began = std::chrono::steady_clock::now();
      keep.on_step(b);
      fed_ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - began).count();
    }
    keep.attach_device(join, UINT64_MAX, &same);
    join.join(UINT64_MAX);
    t += length + 100'000;
    if constexpr (std::is_same_v<Keeper, back_ring>) {
      if ((s + 1) % per_window == 0) keep.next_window();
    }
  }
  figures f;
  f.ns_per_step = fed_ns / (static_cast<double>(steps) * threads);
  f.ring_bytes = keep.bytes();
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint32_t steps = argc > 1 ? static_cast<std::uint32_t>(std::atoi(argv[1])) : 2000;
  std::printf("steptrace retroactive ring (capture_back=8), a live window every tenth of the steps\n");
  struct shape {
    const char* what;
    std::uint32_t threads, calls, kernels;
  };
  for (const shape& sh : {shape{"training step: 1 thread, 12 phase calls, 1,000 kernels", 1, 12, 1000},
                          shape{"server: 64 threads, 300 phase calls each, no device", 64, 300, 0}}) {
    const std::uint32_t n = steps / (sh.threads > 1 ? 8 : 1);  // steps per thread
    back_ring ring;
    ring.configure(8);
    const figures back = run(ring, sh.threads, n, sh.calls, sh.kernels, std::max(1u, n / 10));
    flight_recorder timeline;  // the timeline's recorder at its defaults (64 recent, 8 slowest), fed the same
    timeline.configure(64, 8);
    const figures tl = run(timeline, sh.threads, n, sh.calls, sh.kernels, std::max(1u, n / 10));
    const std::uint64_t kept = ring.kept();
    std::printf("  %s (%u steps a thread)\n", sh.what, n);
    std::printf("    ring: %.1f KiB, %llu steps kept: %.1f KiB a kept step; bound %llu MiB: %s\n",
                back.ring_bytes / 1024.0, static_cast<unsigned long long>(kept), back.ring_bytes / 1024.0 / kept,
                static_cast<unsigned long long>(back_ring::max_bytes >> 20),
                back.ring_bytes <= back_ring::max_bytes + (back_ring::max_bytes >> 1) ? "held" : "MISSED");
    std::printf("    collector per step: ring %.0f ns, timeline %.0f ns (ratio %.2f); the hot path: unchanged\n",
                back.ns_per_step, tl.ns_per_step, back.ns_per_step / tl.ns_per_step);
  }
  return 0;
}

// The collector's cost under a heavy device load, on the fake CUPTI (tests/cpp/fake_gpu.hpp):
// a recording thread runs 2000 steps/s (four phases each) while a "CUPTI" thread delivers
// 200,000 kernel records/s on four streams, as CUPTI's own flush thread would. Printed side by
// side: the collector thread's CPU, the recording thread's own cost of steptrace, and the CUPTI
// thread's decoding, each as a share of one core; once with unnamed kernels and once with named
// kernels and their launch records (the live kernel table), side by side. Then the same second of
// steps and records viewed the incremental way and by rescanning every record per step (the old
// way), and the incremental way with named kernels.
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include "../tests/cpp/fake_gpu.hpp"
#include "analysis/device_view.hpp"
#include "gpu/activity.hpp"
#include "record/clock.hpp"
#include "record/kernel_names.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
using steptrace::detail::host_clock;

namespace {

constexpr int steps_per_s = 2000;
constexpr int kernels_per_s = 200000;
constexpr double seconds = 3.0;

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::uint64_t now_ns() {
  host_clock::init();  // which clock now() reads is settled here
  return host_clock::to_monotonic_ns(host_clock::now());
}

// What a recording thread pays steptrace per step of four phases, timed over back-to-back steps.
double recording_cost_ns() {
  config cfg;
  cfg.print_at_exit = exit_print::never;
  tracer t(cfg);
  constexpr int n = 200'000;
  const double start = thread_cpu_s();
  for (int i = 0; i < n; ++i) {
    scoped_step step(t);
    for (phase_id p : {builtin::input, builtin::h2d, builtin::compute, builtin::wait}) scoped_phase ph(t, p);
  }
  return (thread_cpu_s() - start) * 1e9 / n;
}

// 50 kernel names of the lengths real ones have (CUPTI's strings outlive their records).
const std::vector<std::string>& bench_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (int i = 0; i < 50; ++i) {
      out.push_back(
          "void at::native::vectorized_elementwise_kernel<4, at::native::BenchFunctor" + std::to_string(i) +
          "<float>, at::detail::Array<char*, 3>>(int, at::native::BenchFunctor<float>, at::detail::Array<char*, 3>)");
    }
    return out;
  }();
  return names;
}

void live(bool named) {
  const double recording_ns_per_step = recording_cost_ns();
  steptrace::testing::fake_gpu gpu;
  config cfg;
  cfg.print_at_exit = exit_print::never;
  tracer t(cfg);
  { scoped_step warm(t); }  // starts the backend on the fakes
  std::atomic<bool> stop{false};
  double recording_cpu = 0, cupti_cpu = 0, main_cpu_before = thread_cpu_s();
  const double process_before = process_cpu_s();
  const auto wall_start = std::chrono::steady_clock::now();

  std::thread recorder([&] {  // each step's compute phase lasts until the next step is due
    const double start = thread_cpu_s();
    auto next = std::chrono::steady_clock::now();
    while (!stop.load(std::memory_order_relaxed)) {
      next += std::chrono::microseconds(1'000'000 / steps_per_s);
      scoped_step step(t);
      { scoped_phase p(t, builtin::input); }
      { scoped_phase p(t, builtin::h2d); }
      {
        scoped_phase p(t, builtin::compute);
        std::this_thread::sleep_until(next);
      }
      { scoped_phase p(t, builtin::wait); }
    }
    recording_cpu = thread_cpu_s() - start;
  });
  std::thread cupti([&] {  // every 10 ms, the last 10 ms of kernels, flushed as CUPTI's thread would
    const double start = thread_cpu_s();
    std::vector<steptrace::testing::fake_record> batch;
    std::uint64_t last = now_ns(), correlation = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const std::uint64_t now = now_ns();
      const std::uint64_t n = (now - last) * kernels_per_s / 1'000'000'000;
      batch.clear();
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t at = last + (now - last) * i / std::max<std::uint64_t>(n, 1);
        const auto stream = 1 + static_cast<std::uint32_t>(i % 4);
        if (!named) {
          batch.push_back(steptrace::testing::kernel_record(at, at + 4'000, stream));
          continue;
        }
        const auto corr = static_cast<std::uint32_t>(++correlation);
        batch.push_back(steptrace::testing::launch_record(at > 5'000 ? at - 5'000 : at, at, corr));
        batch.push_back(
            steptrace::testing::named_kernel_record(at, at + 4'000, bench_names()[i % 50].c_str(), corr, stream));
      }
      for (std::size_t i = 0; i < batch.size(); i += 4000) {
        gpu.emit(std::vector<steptrace::testing::fake_record>(batch.begin() + i,
                                                              batch.begin() + std::min(batch.size(), i + 4000)));
      }
      detail::flush_activity(detail::activity_flush::completed);
      last = now;
    }
    cupti_cpu = thread_cpu_s() - start;
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  recorder.join();
  cupti.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  const double main_cpu = thread_cpu_s() - main_cpu_before;
  const double collector_cpu = process_cpu_s() - process_before - recording_cpu - cupti_cpu - main_cpu;
  const summary s = t.summary();
  std::printf("live, %.1f s: %d steps/s of 4 phases, %d %s kernel records/s on 4 streams (fake CUPTI)\n", wall,
              steps_per_s, kernels_per_s, named ? "named (50 names, each with its launch record)" : "unnamed");
  if (named) {
    std::printf(
        "  kernel table: %zu names, %s\n", s.gpu && s.gpu->kernels ? s.gpu->kernels->kernels.size() : 0,
        s.gpu && s.gpu->kernels && !s.gpu->kernels->ops.empty() ? s.gpu->kernels->ops.front().name.c_str() : "(none)");
  }
  std::printf("  backend: %s\n", s.backend.reason.c_str());
  std::printf("  steps counted %llu, kernels per step %.1f (sent %d)\n", static_cast<unsigned long long>(s.steps),
              s.gpu ? s.gpu->kernels_per_step : 0.0, kernels_per_s / steps_per_s);
  std::printf("  collector thread        %6.2f%% of one core   (target <= 5%%)\n", 100 * collector_cpu / wall);
  std::printf("  recording thread, steptrace's calls %6.3f%% of one core (%.0f ns a step, timed apart)\n",
              100 * recording_ns_per_step * steps_per_s * 1e-9, recording_ns_per_step);
  std::printf("  CUPTI thread, decoding and storing %6.2f%% of one core (fake buffers)\n", 100 * cupti_cpu / wall);
}

// One second of steps and records, viewed by the incremental join and by the old full rescan.
void analysis_only() {
  std::mt19937_64 rng(1);
  std::vector<detail::device_record> records;
  for (int i = 0; i < kernels_per_s; ++i) {
    detail::device_record r;
    r.start = static_cast<std::uint64_t>(i) * 5'000;  // one every 5 us
    r.end = r.start + 4'000;
    r.stream = 1 + i % 4;
    records.push_back(r);
  }
  std::vector<detail::device_record> named = records;  // the same, with names and launch times
  for (std::size_t i = 0; i < named.size(); ++i) {
    named[i].name = detail::intern_kernel_name(bench_names()[i % 50].c_str());
    named[i].launched = named[i].start > 2'000 ? named[i].start - 2'000 : 1;
  }
  std::vector<detail::host_segment> segments;
  auto segs = [&](std::uint64_t b) {
    segments = {{b, b + 50'000, builtin::input.value},
                {b + 50'000, b + 100'000, builtin::h2d.value},
                {b + 100'000, b + 450'000, builtin::compute.value},
                {b + 450'000, b + 500'000, builtin::wait.value}};
    return segments;
  };
  // As CUPTI hands them over: in order of completion, the four streams interleaved; the median of
  // seven joins of the same second.
  auto ordered_ms = [&] {
    const auto to = std::chrono::steady_clock::now();
    detail::device_join ordered;
    for (int s = 0; s < steps_per_s; ++s)
      ordered.add_step(s * 500'000ull, s * 500'000ull + 500'000, segs(s * 500'000ull));
    for (std::size_t i = 0; i < records.size(); i += 4096) {
      ordered.add_records(std::vector<detail::device_record>(records.begin() + i,
                                                             records.begin() + std::min(records.size(), i + 4096)));
      ordered.join(records[std::min(records.size(), i + 4096) - 1].end);
    }
    ordered.join(UINT64_MAX);
    gpu_stats out;
    ordered.fill(out);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - to).count();
  };
  std::vector<double> ordered_runs;
  for (int i = 0; i < 7; ++i) ordered_runs.push_back(ordered_ms());
  std::sort(ordered_runs.begin(), ordered_runs.end());
  std::printf("  incremental join, records in order as CUPTI gives them  %.2f ms (median of 7; %.2f-%.2f)\n",
              ordered_runs[3], ordered_runs.front(), ordered_runs.back());
  const auto t0 = std::chrono::steady_clock::now();
  detail::device_join join;
  for (int s = 0; s < steps_per_s; ++s) join.add_step(s * 500'000ull, s * 500'000ull + 500'000, segs(s * 500'000ull));
  std::shuffle(records.begin(), records.end(), rng);
  for (std::size_t i = 0; i < records.size(); i += 4096) {
    join.add_records(
        std::vector<detail::device_record>(records.begin() + i, records.begin() + std::min(records.size(), i + 4096)));
  }
  join.join(UINT64_MAX);
  gpu_stats unnamed_out;
  join.fill(unnamed_out);
  const double incremental = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::shuffle(named.begin(), named.end(), rng);
  const auto tn = std::chrono::steady_clock::now();
  detail::device_join named_join;
  for (int s = 0; s < steps_per_s; ++s)
    named_join.add_step(s * 500'000ull, s * 500'000ull + 500'000, segs(s * 500'000ull));
  for (std::size_t i = 0; i < named.size(); i += 4096) {
    named_join.add_records(
        std::vector<detail::device_record>(named.begin() + i, named.begin() + std::min(named.size(), i + 4096)));
  }
  named_join.join(UINT64_MAX);
  gpu_stats named_out;
  named_join.fill(named_out);
  const double with_names = std::chrono::duration<double>(std::chrono::steady_clock::now() - tn).count();
  std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  const auto t1 = std::chrono::steady_clock::now();
  detail::device_aggregate old;
  for (int s = 0; s < steps_per_s; ++s)
    old.add(detail::view_step(s * 500'000ull, s * 500'000ull + 500'000, segs(s * 500'000ull), records));
  const double rescan = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::printf("analysis of one second (2000 steps, 200,000 records, 1 s retained):\n");
  std::printf(
      "  incremental join   %8.2f ms\n  full rescan (old)  %8.2f ms   (%.0fx; the old way retained up to 10 s, so up "
      "to 10x more)\n",
      incremental * 1e3, rescan * 1e3, rescan / incremental);
  std::printf(
      "  incremental join, named kernels and the kernel table %8.2f ms   (%.2fx the unnamed; %zu kernel rows)\n",
      with_names * 1e3, with_names / incremental, named_out.kernels ? named_out.kernels->kernels.size() : 0);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view only = argc > 1 ? argv[1] : "";  // "live": the collector alone; "join": the analysis alone
  if (only == "join") {
    analysis_only();
    return 0;
  }
  const bool live_only = only == "live";
  live(false);
  std::printf("\n");
  live(true);
  if (live_only) return 0;
  std::printf("\n");
  analysis_only();
}

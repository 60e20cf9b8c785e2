// The device view on synthetic device records with known answers.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>

#include "analysis/aggregate.hpp"
#include "analysis/device_view.hpp"
#include "steptrace/tracer.hpp"

using namespace steptrace;
using namespace steptrace::detail;

namespace {

device_record kernel(std::uint64_t start, std::uint64_t end, std::uint32_t stream = 1) {
  device_record r;
  r.kind = device_activity::kernel;
  r.start = start;
  r.end = end;
  r.stream = stream;
  return r;
}

device_record copy(std::uint64_t start, std::uint64_t end, copy_kind dir, std::uint64_t bytes, bool pageable) {
  device_record r;
  r.kind = device_activity::memcpy;
  r.copy = dir;
  r.start = start;
  r.end = end;
  r.bytes = bytes;
  r.pageable = pageable;
  return r;
}

device_record sync(std::uint64_t start, std::uint64_t end) {
  device_record r;
  r.kind = device_activity::sync;
  r.start = start;
  r.end = end;
  return r;
}

device_record memory(std::uint64_t at, std::uint64_t bytes, bool freed, std::uint32_t context = 0) {
  device_record r;
  r.kind = device_activity::memory;
  r.start = r.end = at;
  r.bytes = bytes;
  r.freed = freed;
  r.context = context;
  return r;
}

const std::uint32_t input = builtin::input.value, compute = builtin::compute.value, wait = builtin::wait.value,
                    other = builtin::other.value;

}  // namespace

TEST_CASE("busy time is the union of overlapping device intervals cut to the step", "[analysis][gpu]") {
  // Step [100, 200); kernels on two streams overlap; one starts before the step, one ends after.
  const std::vector<device_record> records = {kernel(80, 120, 1), kernel(110, 130, 2), kernel(125, 140, 1),
                                              kernel(150, 160, 2), kernel(190, 230, 1)};
  const std::vector<host_segment> segments = {{100, 200, compute}};
  const auto v = view_step(100, 200, segments, records);
  CHECK(v.busy == (140 - 100) + (160 - 150) + (200 - 190));
  CHECK(v.window == 100);
  CHECK(v.kernels == 4);  // the one that started before the step belongs to the previous step
  CHECK(v.idle_by_phase.at(compute) == 100 - 60);
}

TEST_CASE("idle time is cut along the host phases", "[analysis][gpu]") {
  // Host: input [0,40), compute [40,90), wait [90,100). Device: busy [45,85) only.
  const std::vector<host_segment> segments = {{0, 40, input}, {40, 90, compute}, {90, 100, wait}};
  const auto v = view_step(0, 100, segments, {kernel(45, 85)});
  CHECK(v.busy == 40);
  CHECK(v.idle_by_phase.at(input) == 40);
  CHECK(v.idle_by_phase.at(compute) == 5 + 5);
  CHECK(v.idle_by_phase.at(wait) == 10);
  std::uint64_t idle = 0;
  for (auto ns : v.idle_by_phase) idle += ns;
  CHECK(idle == v.window - v.busy);
}

TEST_CASE("copies count bytes by direction and the pageable share", "[analysis][gpu]") {
  const std::vector<device_record> records = {copy(0, 10, copy_kind::h2d, 3000, true),
                                              copy(10, 15, copy_kind::h2d, 1000, false),
                                              copy(50, 60, copy_kind::d2h, 500, false), sync(60, 90)};
  const auto v = view_step(0, 100, {{0, 100, other}}, records);
  CHECK(v.h2d_bytes == 4000);
  CHECK(v.h2d_pageable_bytes == 3000);
  CHECK(v.h2d_ns == 15);
  CHECK(v.d2h_bytes == 500);
  CHECK(v.syncs == 1);
  CHECK(v.sync_ns == 30);
  CHECK(v.busy == 25);  // a sync is host time, not device work

  device_aggregate agg;
  agg.add(v);
  agg.add(v);
  gpu_stats g;
  agg.fill(g);
  CHECK(g.h2d.pageable_share == Approx(0.75));
  CHECK(g.h2d.bytes_per_step == Approx(4000));
  CHECK(g.h2d.gb_per_s == Approx(4000.0 / 15));
  CHECK(g.syncs_per_step == Approx(1));
  CHECK(g.busy_share == Approx(0.25));
}

TEST_CASE("a step that named its stream sees only that stream", "[analysis][gpu]") {
  // Two threads' steps overlap in time on one device, each on its own stream.
  const std::vector<device_record> records = {kernel(0, 50, 1), kernel(20, 80, 2)};
  const auto a = view_step(0, 100, {{0, 100, compute}}, records, {{0, 1}});
  const auto b = view_step(10, 100, {{10, 100, compute}}, records, {{0, 2}});
  CHECK(a.busy == 50);
  CHECK(a.kernels == 1);
  CHECK(a.idle_by_phase.at(compute) == 50);
  CHECK(a.device_busy == 80);  // the device as a whole, both streams
  CHECK_FALSE(a.all_streams);
  CHECK(b.busy == 60);
  CHECK(b.device_busy == 70);  // cut to b's window
  const auto both = view_step(0, 100, {{0, 100, compute}}, records);
  CHECK(both.all_streams);
  CHECK(both.busy == 80);
  CHECK(both.device_busy == 80);
  const auto two = view_step(0, 100, {{0, 100, compute}}, records, {{0, 1}, {0, 2}});
  CHECK(two.busy == 80);
  CHECK(two.kernels == 2);
}

TEST_CASE("stream ids are per context: another device's work is not the step's", "[analysis][gpu]") {
  // Stream id 3 exists in context 1 (device 0) and context 2 (device 1).
  device_record mine = kernel(10, 40, 3), theirs = kernel(30, 90, 3);
  mine.context = 1;
  theirs.context = 2;
  theirs.device = 1;
  device_record ctx_sync = sync(60, 70), other_sync = sync(75, 80);  // context synchronise: no stream
  ctx_sync.context = 1;
  other_sync.context = 2;
  const std::vector<device_record> records = {mine, theirs, ctx_sync, other_sync};
  const auto v = view_step(0, 100, {{0, 100, compute}}, records, {{1, 3}});
  CHECK(v.busy == 30);
  CHECK(v.device_busy == 30);  // device 1 is not one of the step's devices
  CHECK(v.kernels == 1);
  CHECK(v.syncs == 1);  // its own context's sync, not the other device's
  const auto all = view_step(0, 100, {{0, 100, compute}}, records);
  CHECK(all.busy == 80);
  CHECK(all.syncs == 2);
}

TEST_CASE("a step's device memory: allocated, freed, and its peak above its start", "[analysis][gpu]") {
  constexpr std::uint64_t mb = 1'000'000;
  // Held above the start: 10, 15, 5, 13, 8 MB. Before the step: 100 MB (not the step's), and a
  // release on another device (not the step's device).
  const std::vector<device_record> records = {memory(5, 100 * mb, false, 1), kernel(10, 40, 3),
                                              memory(10, 10 * mb, false, 1), memory(20, 5 * mb, false, 1),
                                              memory(30, 10 * mb, true, 1),  memory(35, 50 * mb, true, 2),
                                              memory(40, 8 * mb, false, 1),  memory(50, 5 * mb, true, 1)};
  std::vector<device_record> sorted = records;
  for (device_record& r : sorted) r.context = r.context == 0 ? 1 : r.context;  // the kernel on device 1's stream 3
  const auto v = view_step(8, 100, {{8, 100, compute}}, sorted, {{1, 3}});
  CHECK(v.mem_allocs == 3);
  CHECK(v.mem_allocated == 23 * mb);
  CHECK(v.mem_freed == 15 * mb);
  CHECK(v.mem_peak == 15 * mb);
  device_aggregate agg;
  agg.add(v);
  agg.add(view_step(100, 200, {{100, 200, compute}}, sorted, {{1, 3}}));  // nothing allocated: peak 0
  gpu_stats g;
  agg.fill(g);
  CHECK(g.memory.allocations_per_step == Approx(1.5));
  CHECK(g.memory.allocated_mb_per_step == Approx(11.5));
  CHECK(g.memory.freed_mb_per_step == Approx(7.5));
  CHECK(g.memory.net_mb == Approx(8));
  CHECK(g.memory.step_peak_mb_max == Approx(15).epsilon(0.01));
  CHECK(g.memory.step_peak_mb_p50 == 0);
  // The incremental join agrees.
  device_join join;
  join.add_step(8, 100, {{8, 100, compute}}, {{1, 3}});
  join.add_records(sorted);
  join.join(UINT64_MAX);
  gpu_stats j;
  join.totals.fill(j);
  CHECK(j.memory.net_mb == Approx(8));
  CHECK(j.memory.step_peak_mb_max == Approx(15).epsilon(0.01));
}

TEST_CASE("the aggregate reports idle shares by phase and the median kernel", "[analysis][gpu]") {
  device_aggregate agg;
  for (int i = 0; i < 10; ++i) {
    const std::vector<device_record> records = {kernel(900, 910), kernel(920, 940), kernel(950, 1000)};
    agg.add(view_step(0, 1000, {{0, 900, input}, {900, 1000, compute}}, records));
  }
  gpu_stats g;
  agg.fill(g);
  REQUIRE(!g.idle_by_phase.empty());
  CHECK(g.idle_by_phase[0].first == "input");
  CHECK(g.idle_by_phase[0].second == Approx(900.0 / 920));
  CHECK(g.kernel_median_us == Approx(0.020));
  CHECK(g.kernels_per_step == Approx(3));
  CHECK(g.busy_ms.mean == Approx(80e-6));
  CHECK(g.idle_ms.p50 == Approx(920e-6).epsilon(0.01));
}

TEST_CASE("steps wait for their device records and are viewed once they are in", "[analysis][gpu]") {
  device_join join;
  join.add_step(0, 100, {{0, 100, compute}});
  join.add_step(100, 200, {{100, 200, compute}});
  join.add_records({kernel(150, 190), kernel(10, 60)});  // out of order, as CUPTI buffers arrive
  join.join(150);                                        // only the first step has ended before 150
  gpu_stats g;
  join.totals.fill(g);
  CHECK(g.busy_ms.total == Approx(50e-6));
  join.join(UINT64_MAX);
  join.totals.fill(g);
  CHECK(g.busy_ms.total == Approx(90e-6));
  CHECK(g.kernels_per_step == Approx(1));
}

TEST_CASE("device times from CUDA events become statistics per step and per phase call", "[analysis][gpu]") {
  aggregate totals;
  for (int i = 1; i <= 200; ++i) totals.add_step_device_time(static_cast<float>(i) * 0.5f);  // 0.5 .. 100 ms
  for (int i = 0; i < 10; ++i) totals.add_phase_device_time(compute, 2.0f);
  totals.add_step_device_time(-1.0f);  // a failed read: ignored
  summary s;
  totals.fill(s, 1.0);
  REQUIRE(s.step_device_ms.has_value());
  CHECK(s.step_device_steps == 200);
  CHECK(s.step_device_ms->mean == Approx(50.25).epsilon(1e-6));
  CHECK(s.step_device_ms->p50 == Approx(50.0).epsilon(0.01));
  CHECK(s.step_device_ms->p99 == Approx(99.0).epsilon(0.01));
  CHECK(s.step_device_ms->max == Approx(100.0).epsilon(0.01));
  totals.clear();
  summary empty;
  totals.fill(empty, 1.0);
  CHECK_FALSE(empty.step_device_ms.has_value());
}

TEST_CASE("the incremental join views every step exactly as a full rescan would", "[analysis][gpu]") {
  // Random overlapping records on three streams, arriving in shuffled batches, and steps on two
  // threads whose windows overlap: each step's view from the join equals view_step over every
  // record, the reference that visits them all.
  std::mt19937_64 rng(7);
  std::vector<device_record> all;
  std::uint64_t t = 1'000;
  for (int i = 0; i < 5'000; ++i) {
    t += rng() % 40;
    const std::uint64_t length = 1 + rng() % (i % 97 == 0 ? 5'000 : 60);  // now and then a long one
    device_record r = i % 11 == 0   ? copy(t, t + length, copy_kind::h2d, 64, i % 2 == 0)
                      : i % 13 == 0 ? sync(t, t + length)
                      : i % 17 == 0 ? memory(t, 1 + rng() % 1000, i % 3 == 0)
                                    : kernel(t, t + length, 1 + i % 3);
    r.context = 1 + static_cast<std::uint32_t>(rng() % 2);  // two devices
    if (r.kind == device_activity::memcpy) r.stream = 1 + static_cast<std::uint32_t>(rng() % 3);
    if (r.kind == device_activity::sync && i % 2 == 0) r.stream = 1 + static_cast<std::uint32_t>(rng() % 3);
    all.push_back(r);
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> steps;
  for (std::uint64_t b = 1'000; b < t; b += 300) steps.emplace_back(b, b + 250);  // thread 1
  for (std::uint64_t b = 1'150; b < t; b += 700) steps.emplace_back(b, b + 640);  // thread 2
  device_join join;
  device_aggregate reference;
  std::vector<device_record> sorted = all;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  // Steps on every stream, on one stream, on two streams of one device, on streams of both.
  const std::vector<std::vector<stream_key>> scopes = {{}, {{1, 2}}, {{1, 1}, {1, 3}}, {{1, 1}, {2, 1}}, {{2, 3}}};
  std::size_t n = 0;
  for (auto [b, e] : steps) {
    std::vector<host_segment> segments = {{b, b + (e - b) / 3, input}, {b + (e - b) / 3, e, compute}};
    const std::vector<stream_key>& streams = scopes[n++ % scopes.size()];
    reference.add(view_step(b, e, segments, sorted, streams));
    join.add_step(b, e, segments, streams);
  }
  std::shuffle(all.begin(), all.end(), rng);
  for (std::size_t i = 0; i < all.size(); i += 700) {
    join.add_records(std::vector<device_record>(all.begin() + i, all.begin() + std::min(all.size(), i + 700)));
  }
  join.join(UINT64_MAX);
  gpu_stats a, b;
  join.totals.fill(a);
  reference.fill(b);
  CHECK(a.busy_ms.total == Approx(b.busy_ms.total).epsilon(1e-12));
  CHECK(a.idle_ms.total == Approx(b.idle_ms.total).epsilon(1e-12));
  CHECK(a.busy_ms.p95 == b.busy_ms.p95);
  CHECK(a.kernels_per_step == b.kernels_per_step);
  CHECK(a.h2d.bytes_per_step == b.h2d.bytes_per_step);
  CHECK(a.h2d.pageable_share == b.h2d.pageable_share);
  CHECK(a.syncs_per_step == b.syncs_per_step);
  REQUIRE(a.idle_by_phase.size() == b.idle_by_phase.size());
  for (std::size_t i = 0; i < a.idle_by_phase.size(); ++i) {
    CHECK(a.idle_by_phase[i].first == b.idle_by_phase[i].first);
    CHECK(a.idle_by_phase[i].second == Approx(b.idle_by_phase[i].second).epsilon(1e-12));
  }
  CHECK(a.device_busy_share == Approx(b.device_busy_share).epsilon(1e-12));
  CHECK(a.memory.net_mb == Approx(b.memory.net_mb).epsilon(1e-12));
  CHECK(a.memory.allocations_per_step == b.memory.allocations_per_step);
  CHECK(a.memory.step_peak_mb_p95 == b.memory.step_peak_mb_p95);
  CHECK(a.memory.step_peak_mb_max > 0);
  CHECK(a.steps_all_streams == b.steps_all_streams);
  CHECK(a.steps_all_streams > 0);
  CHECK(a.device_busy_share > a.busy_share);  // most steps see fewer streams than their devices run
  CHECK(a.busy_ms.total > 0);
  CHECK(a.idle_ms.total > 0);
}

TEST_CASE("a summary shows waiting steps provisionally and leaves them waiting", "[analysis][gpu]") {
  device_join join;
  join.add_step(0, 100, {{0, 100, compute}});
  join.add_records({kernel(10, 30)});
  gpu_stats g;
  join.fill(g);
  CHECK(g.busy_ms.total == Approx(20e-6));
  join.add_records({kernel(50, 90)});  // arrives after that summary: still counted in the step
  join.join(UINT64_MAX);
  join.fill(g);
  CHECK(g.busy_ms.total == Approx(60e-6));
  CHECK(g.kernels_per_step == Approx(2));
}

TEST_CASE("NCCL kernels are counted apart, with the time no other kernel hides", "[profiler][device]") {
  auto kernel = [](std::uint64_t a, std::uint64_t b, bool nccl, std::uint32_t stream) {
    device_record r;
    r.kind = device_activity::kernel;
    r.start = a;
    r.end = b;
    r.nccl = nccl;
    r.context = 1;
    r.stream = stream;
    return r;
  };
  // an all-reduce 0..1000 on its stream; compute kernels 200..500 and 450..600 on another
  const std::vector<device_record> records = {kernel(0, 1000, true, 2), kernel(200, 500, false, 1),
                                              kernel(450, 600, false, 1)};
  const step_device_view v = view_step(0, 2000, {}, records);
  CHECK(v.nccl_kernels == 1);
  CHECK(v.nccl_ns == 1000);
  CHECK(v.nccl_exposed_ns == 600);
  // the live path's incremental join gives the same
  device_join join;
  join.add_records(records);
  join.add_step(0, 2000, {});
  join.join(UINT64_MAX);
  gpu_stats g;
  join.fill(g);
  CHECK(g.nccl.kernels_per_step == 1);
  CHECK(g.nccl.ms_per_step == Approx(0.001));
  CHECK(g.nccl.exposed_ms_per_step == Approx(0.0006));
}

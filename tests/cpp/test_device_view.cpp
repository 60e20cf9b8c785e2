// The device view on synthetic device records with known answers.
#include <catch2/catch.hpp>

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
  const std::vector<device_record> records = {copy(0, 10, copy_kind::h2d, 3000, true), copy(10, 15, copy_kind::h2d, 1000, false),
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
  agg.fill(g, 2, 2 * 100e-6);
  CHECK(g.h2d.pageable_share == Approx(0.75));
  CHECK(g.h2d.bytes_per_step == Approx(4000));
  CHECK(g.h2d.gb_per_s == Approx(4000.0 / 15));
  CHECK(g.syncs_per_step == Approx(1));
  CHECK(g.busy_share == Approx(0.25));
}

TEST_CASE("a step that named its stream sees only that stream", "[analysis][gpu]") {
  // Two threads' steps overlap in time on one device, each on its own stream.
  const std::vector<device_record> records = {kernel(0, 50, 1), kernel(20, 80, 2)};
  const auto a = view_step(0, 100, {{0, 100, compute}}, records, 1);
  const auto b = view_step(10, 100, {{10, 100, compute}}, records, 2);
  CHECK(a.busy == 50);
  CHECK(a.kernels == 1);
  CHECK(b.busy == 60);
  const auto both = view_step(0, 100, {{0, 100, compute}}, records);
  CHECK(both.busy == 80);
}

TEST_CASE("the aggregate reports idle shares by phase and the median kernel", "[analysis][gpu]") {
  device_aggregate agg;
  for (int i = 0; i < 10; ++i) {
    const std::vector<device_record> records = {kernel(900, 910), kernel(920, 940), kernel(950, 1000)};
    agg.add(view_step(0, 1000, {{0, 900, input}, {900, 1000, compute}}, records));
  }
  gpu_stats g;
  agg.fill(g, 10, 10 * 1000e-6);
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
  join.join(150);  // only the first step has ended before 150
  gpu_stats g;
  join.totals.fill(g, 1, 100e-6);
  CHECK(g.busy_ms.total == Approx(50e-6));
  join.join(UINT64_MAX);
  join.totals.fill(g, 2, 200e-6);
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

// The live path's diagnosis with a device view: hand-made host records and device records go
// through the collector's own pieces (step builder, aggregate, device join, report), one case
// per label, the saturated GPU with a per-step sync among them.
#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "analysis/aggregate.hpp"
#include "analysis/step_builder.hpp"
#include "report/report.hpp"
#include "steptrace/phase.hpp"

using namespace steptrace;
using namespace steptrace::detail;

namespace {

constexpr std::uint64_t ms = 1'000'000;  // ticks are nanoseconds here
std::uint64_t same(std::uint64_t t) { return t; }

struct run_builder {
  std::vector<record> records;
  std::vector<device_record> device;
  void phase(std::uint64_t a, std::uint64_t b, phase_id id) {
    records.push_back({a, id.value, record_kind::phase_begin});
    records.push_back({b, id.value, record_kind::phase_end});
  }
  void kernel(std::uint64_t a, std::uint64_t b) { add(device_activity::kernel, a, b); }
  void h2d_copy(std::uint64_t a, std::uint64_t b, std::uint64_t bytes, bool pageable) {
    device_record& copy = add(device_activity::memcpy, a, b);
    copy.copy = copy_kind::h2d;
    copy.pageable = pageable;
    copy.bytes = bytes;
  }
  device_record& add(device_activity kind, std::uint64_t a, std::uint64_t b) {
    device_record r;
    r.kind = kind;
    r.start = a;
    r.end = b;
    r.context = 1;
    r.stream = kind == device_activity::sync ? no_stream : 7;
    device.push_back(r);
    return device.back();
  }
  // 20 steps of 10 ms; `body(t0)` lays out one step starting at t0.
  summary run(const std::function<void(std::uint64_t)>& body) {
    for (std::uint64_t i = 0; i < 20; ++i) {
      const std::uint64_t t0 = i * 10 * ms;
      records.push_back({t0, 0, record_kind::step_begin});
      body(t0);
      records.push_back({t0 + 10 * ms, 0, record_kind::step_end});
    }
    aggregate totals;
    totals.set_tick_clock(&same);
    totals.enable_device();
    totals.device()->add_records(device);
    step_builder builder(0, 0);
    builder.consume(records.data(), records.data() + records.size(), totals);
    totals.device()->join(UINT64_MAX);
    summary s;
    totals.fill(s, 1.0);
    complete(s);
    return s;
  }
};

}  // namespace

TEST_CASE("live device view: INPUT-BOUND when the GPU idles while the host fetches", "[diagnosis][device]") {
  run_builder b;
  const summary s = b.run([&](std::uint64_t t) {
    b.phase(t, t + 4 * ms, builtin::input);
    b.phase(t + 4 * ms, t + 10 * ms, builtin::compute);
    b.kernel(t + 4 * ms, t + 10 * ms);
  });
  CHECK(s.diag.label == "INPUT-BOUND");
  CHECK_THAT(s.diag.evidence,
             Catch::Matchers::Contains("The GPU sat idle 40.0% of step time while the host was in `input`"));
}

TEST_CASE("live device view: H2D-BOUND when the GPU idles through pageable copies", "[diagnosis][device]") {
  run_builder b;
  const summary s = b.run([&](std::uint64_t t) {
    b.phase(t, t + 3 * ms, builtin::h2d);
    b.h2d_copy(t + 2500 * 1000, t + 3 * ms, 1 << 20, true);
    b.phase(t + 3 * ms, t + 10 * ms, builtin::compute);
    b.kernel(t + 3 * ms, t + 10 * ms);
  });
  CHECK(s.diag.label == "H2D-BOUND");
  CHECK_THAT(s.diag.evidence, Catch::Matchers::Contains("idle 25.0% while the host was in `h2d`") &&
                                  Catch::Matchers::Contains("copying with no kernel running 5.0%"));
  CHECK_THAT(s.diag.advice.at(0), Catch::Matchers::Contains("100% of the copied bytes are pageable") &&
                                      Catch::Matchers::EndsWith("(up to 30% shorter steps)"));
  // the gain is the time the GPU computed nothing for the copy: idle 2.5 and copying 0.5 of every 10 ms
  REQUIRE(s.diag.gains.size() == 1);
  CHECK(s.diag.gains[0].first == "h2d");
  CHECK(s.diag.gains[0].second == Approx(0.30).margin(1e-12));
}

TEST_CASE("live device view: H2D-BOUND when a large pageable copy keeps the GPU copying, computing nothing",
          "[diagnosis][device]") {
  // Found on an H100: a 64 MiB pageable batch a step and a small model. The device is busy the
  // whole step (copies count as busy), so the rules read COMPUTE-BOUND; yet its compute units
  // sat through 7 of every 10 ms of copying.
  run_builder b;
  const summary s = b.run([&](std::uint64_t t) {
    b.phase(t, t + 7 * ms, builtin::h2d);
    b.h2d_copy(t + 100 * 1000, t + 7 * ms, 64 << 20, true);
    b.phase(t + 7 * ms, t + 10 * ms, builtin::compute);
    b.kernel(t + 7 * ms, t + 9900 * 1000);
  });
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->h2d.exposed_ms_per_step == Approx(6.9).margin(1e-9));
  CHECK(s.diag.label == "H2D-BOUND");
  REQUIRE(s.diag.gains.size() == 1);
  CHECK(s.diag.gains[0].second == Approx(0.70).margin(1e-9));  // idle 0.1 ms, copying 6.9 ms, of 10
  // The JSON carries it; a summary written before the field reads it as 0.
  auto j = nlohmann::json::parse(s.json());
  CHECK(j["gpu"]["h2d"]["exposed_ms_per_step"].get<double>() == Approx(6.9).margin(1e-9));
  CHECK(summary::from_json(s.json()).gpu->h2d.exposed_ms_per_step == Approx(6.9).margin(1e-9));
  j["gpu"]["h2d"].erase("exposed_ms_per_step");
  const summary older = summary::from_json(j.dump());
  REQUIRE(older.gpu.has_value());
  CHECK(older.gpu->h2d.exposed_ms_per_step == 0);
  CHECK(older.gpu->h2d.bytes_per_step == s.gpu->h2d.bytes_per_step);
  // The same copy hidden under a kernel on another stream is no cause.
  run_builder h;
  const summary hidden = h.run([&](std::uint64_t t) {
    h.phase(t, t + 7 * ms, builtin::h2d);
    h.h2d_copy(t + 100 * 1000, t + 7 * ms, 64 << 20, false);
    h.add(device_activity::kernel, t, t + 10 * ms).stream = 8;
  });
  REQUIRE(hidden.gpu.has_value());
  CHECK(hidden.gpu->h2d.exposed_ms_per_step == Approx(0).margin(1e-9));
  CHECK(hidden.diag.label != "H2D-BOUND");
}

TEST_CASE("live device view: copies already pinned are never told to pin; the fix that can give more comes first",
          "[diagnosis][device]") {
  // Found on an H200: a 64 MiB pinned batch copied with non_blocking=True before a small model, on
  // one stream; the copy is the step, and the advice was "DataLoader(pin_memory=True)".
  auto advice_text = [](const diagnosis& d) {
    std::string all;
    for (const std::string& a : d.advice) all += a + "\n";
    return all;
  };
  // The copy (6.9 ms) outlasts the kernels (2.9 ms): a side stream could hide at most the kernels'
  // time, so fewer bytes comes first, with the whole copy as its bound.
  run_builder longer;
  const summary s = longer.run([&](std::uint64_t t) {
    longer.phase(t, t + 7 * ms, builtin::h2d);
    longer.h2d_copy(t + 100 * 1000, t + 7 * ms, 64 << 20, false);
    longer.phase(t + 7 * ms, t + 10 * ms, builtin::compute);
    longer.kernel(t + 7 * ms, t + 9900 * 1000);
  });
  CHECK(s.diag.label == "H2D-BOUND");
  REQUIRE(s.diag.advice.size() == 3);
  CHECK_THAT(advice_text(s.diag),
             !Catch::Matchers::Contains("pin_memory=True") && !Catch::Matchers::Contains("pin them"));
  CHECK_THAT(s.diag.advice[0], Catch::Matchers::StartsWith("copy fewer bytes") &&
                                   Catch::Matchers::Contains("already come from pinned memory (0% pageable") &&
                                   Catch::Matchers::Contains("6.900 ms a step that no kernel hides") &&
                                   Catch::Matchers::Contains("the 2.900 ms of kernels") &&
                                   Catch::Matchers::EndsWith("(up to 70% shorter steps)"));
  CHECK_THAT(s.diag.advice[1], Catch::Matchers::StartsWith("copy the next batch on a side stream") &&
                                   Catch::Matchers::EndsWith("(up to 29% shorter steps)"));
  CHECK_THAT(s.diag.advice[2], Catch::Matchers::StartsWith("fewer, larger copies"));
  // The copy (3 ms) shorter than the kernels (6.9 ms) it waits behind on the same stream: a side
  // stream can hide all of it, so that comes first.
  run_builder shorter;
  const summary h = shorter.run([&](std::uint64_t t) {
    shorter.phase(t, t + 3 * ms, builtin::h2d);
    shorter.h2d_copy(t, t + 3 * ms, 16 << 20, false);
    shorter.phase(t + 3 * ms, t + 10 * ms, builtin::compute);
    shorter.kernel(t + 3 * ms, t + 9900 * 1000);
  });
  CHECK(h.diag.label == "H2D-BOUND");
  REQUIRE(h.diag.advice.size() == 3);
  CHECK_THAT(h.diag.advice[0], Catch::Matchers::StartsWith("copy the next batch on a side stream") &&
                                   Catch::Matchers::Contains("already come from pinned memory") &&
                                   Catch::Matchers::EndsWith("(up to 30% shorter steps)"));
  CHECK_THAT(h.diag.advice[1], Catch::Matchers::StartsWith("copy fewer bytes"));
  // Many small pinned copies: fewer, larger copies first, said once, with the copies' count and size.
  run_builder small;
  const summary m = small.run([&](std::uint64_t t) {
    small.phase(t, t + 4 * ms, builtin::h2d);
    for (std::uint64_t i = 0; i < 20; ++i) small.h2d_copy(t + i * 200 * 1000, t + (i + 1) * 200 * 1000, 64000, false);
    small.phase(t + 4 * ms, t + 10 * ms, builtin::compute);
    small.kernel(t + 4 * ms, t + 9900 * 1000);
  });
  CHECK(m.diag.label == "H2D-BOUND");
  CHECK_THAT(m.diag.advice.at(0), Catch::Matchers::StartsWith("fewer, larger copies: 20 copies a step of 64 KB"));
  CHECK_THAT(advice_text(m.diag), !Catch::Matchers::Contains("\nfewer, larger copies"));
}

TEST_CASE("live device view: WAIT-HEAVY when the GPU idles through a blocking copy and a sync", "[diagnosis][device]") {
  run_builder b;
  const summary s = b.run([&](std::uint64_t t) {
    b.phase(t, t + 5 * ms, builtin::compute);
    b.kernel(t, t + 5 * ms);
    b.phase(t + 5 * ms, t + 9 * ms, builtin::wait);
    device_record& copy = b.add(device_activity::memcpy, t + 5 * ms, t + 5200 * 1000);
    copy.copy = copy_kind::d2h;
    b.add(device_activity::sync, t + 5200 * 1000, t + 9 * ms);
  });
  CHECK(s.diag.label == "WAIT-HEAVY");
  CHECK(s.gpu->syncs_per_step == 1);
  // the GPU idles from the copy's end (5.2 ms) to the step's end (10 ms), with the host in `wait`
  // until 9 ms and in no phase after: both causes, each with its idle time
  REQUIRE(s.diag.gains.size() == 2);
  CHECK(s.diag.gains[0].first == "wait");
  CHECK(s.diag.gains[0].second == Approx(0.38).margin(1e-9));
  CHECK(s.diag.gains[1].first == "other");
  CHECK(s.diag.gains[1].second == Approx(0.10).margin(1e-9));
}

TEST_CASE("live device view: a saturated GPU with a per-step sync is COMPUTE-BOUND, not WAIT-HEAVY",
          "[diagnosis][device]") {
  run_builder b;
  const summary s = b.run([&](std::uint64_t t) {
    b.phase(t, t + 5 * ms, builtin::compute);  // launches
    b.kernel(t + 200 * 1000, t + 9800 * 1000);
    b.phase(t + 5 * ms, t + 10 * ms, builtin::wait);  // .item(): blocked until the GPU is done
    b.add(device_activity::sync, t + 5 * ms, t + 9800 * 1000);
  });
  CHECK(s.phase("wait")->share == Approx(0.5));  // the host blocked half of every step
  CHECK(s.gpu->busy_share == Approx(0.96));
  CHECK(s.diag.label == "COMPUTE-BOUND");
  CHECK_THAT(s.diag.evidence, Catch::Matchers::Contains("removing the syncs would not make the GPU faster"));
  CHECK(s.diag.gains.empty());  // no wait gain: the GPU was busy while the host waited
}

TEST_CASE("live device view: LAUNCH-BOUND for many short kernels, BALANCED for one long one that leaves gaps",
          "[diagnosis][device]") {
  run_builder tiny;
  const summary launch = tiny.run([&](std::uint64_t t) {
    tiny.phase(t, t + 10 * ms, builtin::compute);
    for (std::uint64_t k = 0; k < 100; ++k) tiny.kernel(t + k * 100 * 1000, t + k * 100 * 1000 + 10 * 1000);
  });
  CHECK(launch.gpu->kernel_time_median_us == Approx(10).margin(0.5));
  CHECK(launch.diag.label == "LAUNCH-BOUND");
  run_builder gaps;
  const summary balanced = gaps.run([&](std::uint64_t t) {
    gaps.phase(t, t + 10 * ms, builtin::compute);
    gaps.kernel(t + 1 * ms, t + 4 * ms);
  });
  CHECK(balanced.diag.label == "BALANCED");
  CHECK_THAT(balanced.diag.evidence, Catch::Matchers::Contains("yet not for launches"));
}

TEST_CASE("steps that did no GPU work are diagnosed by the host rules, and say so", "[diagnosis][gpu]") {
  // A CPU loop on a GPU machine, CUPTI on: found on an H100, where the demo's CPU scenarios read
  // "GPU idle 100% of the step" and one was BALANCED with "kernels under 0.0 us".
  run_builder b;
  const summary s = b.run([&](std::uint64_t t0) {
    b.phase(t0, t0 + 7 * ms, builtin::input);
    b.phase(t0 + 7 * ms, t0 + 10 * ms, builtin::compute);
  });
  REQUIRE(s.gpu.has_value());
  CHECK(s.gpu->steps_viewed == 20);
  CHECK(s.diag.label == "INPUT-BOUND");
  CHECK_THAT(s.diag.evidence, Catch::Matchers::Contains("no GPU work in these steps"));
  CHECK_THAT(s.diag.evidence, !Catch::Matchers::Contains("GPU idle"));
  CHECK_THAT(s.table(), Catch::Matchers::Contains("no GPU work in the 20 steps viewed"));
  CHECK_THAT(s.table(), !Catch::Matchers::Contains("busy 0.0%"));
  // One kernel in one step is GPU work: the device view decides again.
  run_builder k;
  const summary with_kernel = k.run([&](std::uint64_t t0) {
    k.phase(t0, t0 + 7 * ms, builtin::input);
    k.phase(t0 + 7 * ms, t0 + 10 * ms, builtin::compute);
    if (t0 == 0) k.kernel(t0 + 8 * ms, t0 + 9 * ms);
  });
  CHECK_THAT(with_kernel.diag.evidence, Catch::Matchers::Contains("GPU idle"));
}

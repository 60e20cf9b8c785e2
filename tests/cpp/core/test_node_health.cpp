// A rank's node (core/live/node_reading.hpp) through a fake NVML (fake_nvml.cpp, its readings set in
// the environment), and what the straggler verdict says of it: a throttled node is cited against
// the median rank's, a healthy job's nodes cite nothing.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/live/node_reading.hpp"
#include "helpers.hpp"
#include "rank_summaries.hpp"
#include "record/host_health.hpp"
#include "report/diagnosis/straggler.hpp"
#include "steptrace/summary.hpp"

using namespace steptrace;

namespace {

struct nvml_env {  // the fake NVML, and the variables a test set, cleared after it
  explicit nvml_env(std::vector<std::pair<const char*, const char*>> vars) : vars_(std::move(vars)) {
    setenv("STEPTRACE_NVML_LIBRARY", STEPTRACE_FAKE_NVML, 1);
    for (const auto& [k, v] : vars_) setenv(k, v, 1);
  }
  ~nvml_env() {
    unsetenv("STEPTRACE_NVML_LIBRARY");
    for (const auto& [k, v] : vars_) unsetenv(k);
  }
  std::vector<std::pair<const char*, const char*>> vars_;
};

// Rank r's live row: the same host figures on every rank, its node as read.
std::string row(std::uint32_t r, const node_health& node) {
  summary w = testing::rank_summary(r, 4, {{"input", 1}, {"compute", 20}, {"wait", 5}});
  w.node = node;
  return live_row(w);
}

}  // namespace

TEST_CASE("NVML's readings of the GPU, and XID events counted as they come", "[node]") {
  nvml_env env({{"FAKE_NVML_SM_MHZ", "1410"}, {"FAKE_NVML_REASONS", "21"}, {"FAKE_NVML_XIDS", "2"}});
  detail::node_reader reader;
  const node_health n = reader.read(0, true);
  CHECK(n.gpu);
  CHECK(n.sm_clock_mhz == 1410);
  CHECK(n.mem_clock_mhz == 2619);
  CHECK(n.power_w == Approx(450));
  CHECK(n.temperature_c == 55);
  CHECK(n.throttle == 0x20);  // thermal slowdown; 0x1 (idle) is not a slowdown
  CHECK(n.ecc_errors == 0);
  CHECK(n.xid_errors == 2);
  CHECK(reader.read(0, true).xid_errors == 2);         // counted once
  CHECK(reader.read(0, true).involuntary_per_s >= 0);  // the host's, from the second read on
}

TEST_CASE("no NVML, or no such GPU: no GPU readings, the host's still", "[node]") {
  {
    nvml_env env(std::vector<std::pair<const char*, const char*>>{{"FAKE_NVML_FAIL", "1"}});
    detail::node_reader reader;
    const node_health n = reader.read(0, true);
    CHECK_FALSE(n.gpu);
    CHECK(n.sm_clock_mhz < 0);
  }
  nvml_env env(std::vector<std::pair<const char*, const char*>>{});
  detail::node_reader other;
  CHECK_FALSE(other.read(3, true).gpu);  // the fake has one GPU
  detail::node_reader first;
  CHECK(first.read(0, true).gpu);
}

TEST_CASE("a throttled rank's node is cited in the straggler verdict; a healthy job's cites nothing", "[node][ranks]") {
  node_health healthy;
  healthy.gpu = true, healthy.sm_clock_mhz = 1980, healthy.mem_clock_mhz = 2619, healthy.power_w = 690;
  healthy.temperature_c = 55, healthy.ecc_errors = 0, healthy.xid_errors = 0, healthy.steal_share = 0;
  healthy.involuntary_per_s = 20, healthy.others_cpu_share = 0.01;
  node_health hot = healthy;
  hot.sm_clock_mhz = 1410, hot.temperature_c = 88, hot.throttle = 0x20 | 0x40;
  // rank 2 computes 10 ms longer (its clock is held low) and the others wait for it
  std::vector<std::string> rows;
  for (std::uint32_t r = 0; r < 4; ++r) {
    summary w =
        testing::rank_summary(r, 4, {{"input", 1}, {"compute", r == 2 ? 30.0 : 20.0}, {"wait", r == 2 ? 0.2 : 10.2}});
    w.node = r == 2 ? hot : healthy;
    rows.push_back(live_row(w));
    CHECK(rows.back().size() < 256);
  }
  const std::optional<straggler_info> s = window_straggler(rows);
  REQUIRE(s);
  CHECK(s->rank == 2);
  CHECK(s->node ==
        "SM clock 1410 MHz against 1980 median, temperature 88 C against 55 median, thermal slowdown, "
        "hardware thermal slowdown");
  // every rank healthy: nothing cited
  rows.clear();
  for (std::uint32_t r = 0; r < 4; ++r) rows.push_back(row(r, healthy));
  const std::optional<straggler_info> none = window_straggler(rows);
  CHECK_FALSE(none);
  CHECK(detail::node_departures(healthy, {healthy, healthy, healthy}).empty());
  // a reason every rank shares (a power cap the job set) is not the node's
  node_health capped = healthy;
  capped.throttle = 0x4;
  CHECK(detail::node_departures(capped, {capped, capped}).empty());
  CHECK(detail::node_departures(capped, {healthy, healthy}) == "power cap");
}

TEST_CASE("a steal counter that steps back reads nothing, never a wrapped share", "[node]") {
  testing::temp_dir dir;
  const std::string stat = (dir.path / "stat").string();
  auto ticks = [&](unsigned long long user, unsigned long long steal) {  // /proc/stat's first line
    std::ofstream(stat) << "cpu " << user << " 0 0 1000 0 0 0 " << steal << " 0 0\ncpu0 1 2 3\n";
  };
  detail::host_health_reader host(stat.c_str());
  ticks(1000, 500);
  CHECK(host.read().steal_share == -1);  // the first read starts the span
  ticks(1900, 600);                      // 1,000 ticks more, 100 of them stolen
  CHECK(host.read().steal_share == Approx(0.1));
  ticks(2900, 400);  // the steal clock went back 200 ticks
  CHECK(host.read().steal_share == -1);
  ticks(3800, 500);
  CHECK(host.read().steal_share == Approx(0.1));
}

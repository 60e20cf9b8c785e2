// Capture on trouble as an object of its own (core/capture): driven through a capture_context
// the test writes, with hand-made steps, no tracer, no collector and no GPU. What it writes is
// read back from the folder the context names.
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "core/capture/capturer.hpp"
#include "helpers.hpp"
#include "record/clock.hpp"
#include "report/report.hpp"

using namespace steptrace;
using namespace steptrace::detail;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t ms = 1'000'000;

// A tracer as the capture sees it: options, no rank, no device; it counts what it is asked.
struct fake_tracer final : capture_context {
  config cfg;
  std::optional<rank_info> who;
  std::vector<std::pair<std::string, std::string>> run_facts;
  int spans_changes = 0;
  const config& options() const override { return cfg; }
  const std::optional<rank_info>& rank() const override { return who; }
  const std::vector<std::pair<std::string, std::string>>& facts() const override { return run_facts; }
  const device_join* device() const override { return nullptr; }
  std::uint64_t run_begin() const override { return 0; }
  void read_device_now() override {}
  void spans_wanted_changed() override { ++spans_changes; }
  void finish(summary& s) const override { complete(s); }
};

const std::vector<phase_slice> no_phases;
const std::vector<host_segment> no_segments;
const std::vector<stream_key> no_streams;
const std::vector<phase_span> no_spans;

built_step step_at(std::uint64_t begin, std::uint64_t length, std::uint64_t index) {
  return {begin,     begin + length, 0,          false,    false, index == 0, 0,    index,
          no_phases, no_segments,    no_streams, no_spans, 0,     0,          false};
}

std::vector<fs::path> traces_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().string().find(".trace.json") != std::string::npos) out.push_back(e.path());
  }
  return out;
}

}  // namespace

TEST_CASE("an armed capture keeps the next steps that begin after it, writes them once, and counts to capture_max",
          "[capture_alone]") {
  testing::temp_dir dir;
  fake_tracer t;
  t.cfg.capture_dir = dir.path.string();
  t.cfg.capture_steps = 2;
  t.cfg.capture_max = 1;
  t.cfg.capture_back = 0;
  t.run_facts = {{"run.program", "trainer"}};
  capturer c;
  c.configure(t.cfg, true);
  const std::uint64_t before = host_clock::now();
  REQUIRE(c.arm(t, "test", 0));
  CHECK(c.armed());
  CHECK(t.spans_changes == 1);                       // phase calls kept from now on
  CHECK_FALSE(c.arm(t, "again", 0));                 // one at a time
  c.on_step(step_at(before - 50 * ms, 10 * ms, 4));  // began before it was armed: not kept
  const std::uint64_t after = host_clock::now() + 1;
  c.on_step(step_at(after, 10 * ms, 5));
  c.on_step(step_at(after + 10 * ms, 10 * ms, 6));
  c.on_step(step_at(after + 20 * ms, 10 * ms, 7));  // past capture_steps: not kept
  std::mutex m;
  std::unique_lock<std::mutex> lock(m);
  c.tick(lock, t);
  CHECK(lock.owns_lock());
  CHECK_FALSE(c.armed());
  CHECK(t.spans_changes == 2);  // and no longer
  REQUIRE(c.done().size() == 1);
  const capture_record& r = c.done().front();
  CHECK(r.first_step == 5);
  CHECK(r.last_step == 6);
  CHECK(r.steps == 2);
  CHECK(r.reason == "test");
  CHECK_FALSE(r.label.empty());  // finished: diagnosed
  const auto files = traces_in(dir.path);
  REQUIRE(files.size() == 1);
  CHECK(files.front() == fs::path(r.path));
  CHECK(files.front().filename().string().rfind("trainer-rank0-step5-pid", 0) == 0);
  CHECK(c.take_unsent().size() == 1);
  CHECK(c.take_unsent().empty());        // each window carries the captures since the last
  CHECK_FALSE(c.arm(t, "a second", 0));  // capture_max
}

TEST_CASE("a retroactive capture writes the kept steps a trigger chose, at once", "[capture_alone]") {
  testing::temp_dir dir;
  fake_tracer t;
  t.cfg.capture_dir = dir.path.string();
  t.cfg.capture_back = 3;
  capturer c;
  c.configure(t.cfg, true);
  CHECK(c.spans_wanted());  // the ring keeps phase calls
  for (std::uint64_t i = 0; i < 6; ++i) c.ring().on_step(step_at(i * 10 * ms, 10 * ms, i));
  const std::vector<std::uint64_t> chosen = c.arm_back(t, "signal", kept_steps::recent, {});
  CHECK(chosen == std::vector<std::uint64_t>{3, 4, 5});
  CHECK(c.arm_back(t, "again", kept_steps::recent, {}).empty());  // one chosen at a time
  std::mutex m;
  std::unique_lock<std::mutex> lock(m);
  c.tick(lock, t);  // no device: written at once
  REQUIRE(c.done().size() == 1);
  const capture_record& r = c.done().front();
  CHECK(r.retroactive);
  CHECK(r.indices == chosen);
  CHECK(r.tripped == 5);
  CHECK(traces_in(dir.path).size() == 1);
}

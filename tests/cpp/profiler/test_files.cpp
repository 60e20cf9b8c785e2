// Files from outside and files steptrace writes: from_json is total and bounded on hostile
// input, and every file written is whole or absent, its temporaries never left for good.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <system_error>

#include "base/whole_file.hpp"
#include "helpers.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

std::string a_summary_json() {
  tracer t(testing::quiet());
  const phase_id decode = register_phase("files.decode");
  for (int i = 0; i < 3; ++i) {
    scoped_step s(t);
    scoped_phase p(t, decode);
  }
  return t.summary().json();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

fs::path fresh_folder(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("steptrace-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("from_json: a number out of range anywhere is a named error, not an escaping exception", "[files]") {
  const std::string json = a_summary_json();
  for (const std::string& bad : {replaced(json, "\"steps\": 3", "\"steps\": 1e400"),
                                 replaced(json, "\"schema\"", "\"unknown\": [1e400], \"schema\""),
                                 replaced(json, "\"steps\": 3", "\"steps\": -1e400")}) {
    CHECK_THROWS_AS(summary::from_json(bad), std::invalid_argument);
    CHECK_THROWS_WITH(summary::from_json(bad), Contains("steptrace:"));
  }
}

TEST_CASE("from_json: deep nesting is refused in one short line, in linear time", "[files]") {
  for (std::size_t depth : {65ul, 10'000ul, 100'000ul}) {
    const std::string deep = std::string(depth, '[') + std::string(depth, ']');
    try {
      summary::from_json(deep);
      FAIL("accepted " << depth << " levels");
    } catch (const std::invalid_argument& e) {
      CHECK_THAT(e.what(), Contains("nested deeper than 64 levels"));
      CHECK(std::string(e.what()).size() < 120);
    }
  }
  // Brackets inside strings are text, not nesting: a name may hold any number.
  const std::string json = replaced(a_summary_json(), "files.decode", std::string(200, '['));
  CHECK(summary::from_json(json).phase(std::string(200, '[')) != nullptr);
}

TEST_CASE("from_json: a bad value is shown cut short", "[files]") {
  const std::string huge = "\"" + std::string(20'000, 'x') + "\"";
  const std::string json = replaced(a_summary_json(), "\"steps\": 3", "\"steps\": " + huge);
  try {
    summary::from_json(json);
    FAIL("accepted a string as a count");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).size() < 200);
  }
}

TEST_CASE("from_json: control characters in a file's names come back escaped, recorded labels unchanged", "[files]") {
  const std::string json = a_summary_json();
  // A crafted name: retitle the terminal, clear the screen, write the clipboard (OSC 52), C1 CSI.
  const std::string crafted =
      replaced(json, "\"files.decode\"", R"("x\u001b]0;owned\u0007\u001b[2J\u001b]52;c;aGk=\u0007\u009b31m")");
  const summary s = summary::from_json(crafted);
  REQUIRE(s.phases.size() >= 2);
  const phase_stats* p = s.phase(R"(x\x1B]0;owned\x07\x1B[2J\x1B]52;c;aGk=\x07\xC2\x9B31m)");
  REQUIRE(p != nullptr);
  for (const std::string& text : {s.table(), s.json()}) {
    CHECK(text.find('\x1b') == std::string::npos);
    CHECK(text.find('\x07') == std::string::npos);
    CHECK(text.find("\xC2\x9B") == std::string::npos);
  }
  // A recorded label with escapes in it (a name with a tab, a backslash) reads back as it was.
  tracer t(testing::quiet());
  const phase_id odd = register_phase("files.load\tshard\\x");
  {
    scoped_step st(t);
    scoped_phase ph(t, odd);
  }
  const summary back = summary::from_json(t.summary().json());
  CHECK(back.phase(R"(files.load\tshard\\x)") != nullptr);
}

TEST_CASE("from_json: figures that cannot hold together are refused, named, before any is shown", "[files]") {
  tracer t(testing::quiet());
  const phase_id decode = register_phase("files.decode");
  for (int i = 0; i < 5; ++i) {
    scoped_step s(t);
    scoped_phase p(t, decode);
  }
  const summary s = t.summary();
  REQUIRE(s.phases.size() >= 2);
  CHECK_NOTHROW(summary::from_json(s.json()));
  const auto forged = [&](auto&& change) {
    summary f = s;
    change(f);
    return f.json();
  };
  CHECK_THROWS_WITH(summary::from_json(forged([](summary& f) { f.phases[0].share = 0.9, f.phases[1].share = 0.9; })),
                    Contains("shares sum to 1.800, not 1"));
  CHECK_THROWS_WITH(
      summary::from_json(forged([](summary& f) { f.step_ms.p50 = 9, f.step_ms.p95 = 5, f.step_ms.max = 1; })),
      Contains("step_ms: p50 9 p95 5") && Contains("not in order"));
  CHECK_THROWS_WITH(summary::from_json(forged([](summary& f) { f.phases[0].ms.p99 = f.phases[0].ms.max + 1; })),
                    Contains("not in order"));
  CHECK_THROWS_WITH(summary::from_json(forged([](summary& f) { f.diag.label = "ALL-GOOD"; })),
                    Contains("ALL-GOOD is none of steptrace's labels"));
}

TEST_CASE("from_json: seeded mutations of a real summary never escape as anything but invalid_argument", "[files]") {
  const std::string json = a_summary_json();
  std::mt19937 rng(20261124);
  const std::string pieces[] = {
      "1e400",   "-1",   "NaN", "[", "]",   "{",          "}",   "\"", "null", "18446744073709551616",
      "\\u0000", "\xff", ",",   ":", "0.5", "[[[[[[[[[[", "true"};
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string m = json;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % m.size();
      switch (rng() % 3) {
        case 0:
          m.insert(at, pieces[rng() % std::size(pieces)]);
          break;
        case 1:
          m.erase(at, 1 + rng() % 8);
          break;
        default:
          m[at] = static_cast<char>(rng() % 256);
          break;
      }
    }
    try {
      const summary s = summary::from_json(m);
      (void)s.table();  // what it accepted renders
      (void)s.json();
      ++accepted;
    } catch (const std::invalid_argument&) {
    }
  }
  INFO(accepted << " of 3000 mutations still read as summaries");
  CHECK(accepted < 3000);
}

TEST_CASE("write_file: whole or absent, short temporaries, a NUL refused", "[files]") {
  const fs::path dir = fresh_folder("write");
  const std::string long_name = (dir / (std::string(250, 'r') + ".json")).string();  // 255 bytes: NAME_MAX
  write_file(long_name, "{\"a\": 1}\n");
  CHECK(read_all(long_name) == "{\"a\": 1}\n");
  write_file(long_name, "second\n");  // over an existing file
  CHECK(read_all(long_name) == "second\n");

  CHECK_THROWS_AS(write_file(std::string("run.json\0../escape", 18), "x"), std::system_error);
  try {
    write_file((dir / "missing" / "run.json").string(), "x");
    FAIL("wrote into a missing folder");
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == ENOENT);
    CHECK_THAT(e.what(), Contains("missing/run.json"));
  }
  try {
    write_file("/dev/full", "x");  // a device is written in place, never replaced by a file
    FAIL("wrote /dev/full");
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == ENOSPC);
    CHECK_THAT(e.what(), Contains("/dev/full"));
  }
  CHECK(fs::is_character_file("/dev/full"));
  std::size_t left = 0;
  for (const auto& e : fs::directory_iterator(dir)) left += e.path().filename().string().rfind(".steptrace-", 0) == 0;
  CHECK(left == 0);
  fs::remove_all(dir);
}

TEST_CASE("write_file: a write cut short by the file size limit leaves the old file whole", "[files]") {
  const fs::path dir = fresh_folder("limit");
  const std::string path = (dir / "run.json").string();
  write_file(path, "old\n");
  const pid_t child = ::fork();
  if (child == 0) {  // the limit and its signal in a child alone
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit small{1000, RLIM_INFINITY};
    ::setrlimit(RLIMIT_FSIZE, &small);
    try {
      write_file(path, std::string(5000, 'n'));
      std::_Exit(1);
    } catch (const std::system_error& e) {
      std::_Exit(e.code().value() == EFBIG ? 0 : 2);
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(read_all(path) == "old\n");
  const auto files = std::distance(fs::directory_iterator(dir), fs::directory_iterator());
  CHECK(files == 1);  // no temporary left
  fs::remove_all(dir);
}

TEST_CASE("temporaries of a process that is gone are removed by the next write; a live one's are kept", "[files]") {
  const fs::path dir = fresh_folder("stale");
  const pid_t child = ::fork();
  if (child == 0) std::_Exit(0);
  ::waitpid(child, nullptr, 0);  // its pid now names no process (reuse within the test is unlikely)
  const fs::path dead = dir / (".steptrace-" + std::to_string(child) + "-0.tmp");
  const fs::path alive = dir / (".steptrace-" + std::to_string(::getppid()) + "-3.tmp");
  const fs::path other = dir / ".steptrace-notes.tmp";
  for (const fs::path& p : {dead, alive, other}) std::ofstream(p) << "half";
  write_file((dir / "run.json").string(), "x\n");
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(alive));
  CHECK(fs::exists(other));
  fs::remove_all(dir);
}

TEST_CASE("append_whole_line: a line cut short is taken back, the file stays whole lines", "[files]") {
  const fs::path dir = fresh_folder("append");
  const std::string path = (dir / "live.jsonl").string();
  REQUIRE(detail::append_whole_line(path, "{\"window\": 1}\n") == 0);
  const pid_t child = ::fork();
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit small{100, RLIM_INFINITY};
    ::setrlimit(RLIMIT_FSIZE, &small);
    std::_Exit(detail::append_whole_line(path, "{\"window\": 2, \"pad\": \"" + std::string(500, 'p') + "\"}\n") == EFBIG
                   ? 0
                   : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(read_all(path) == "{\"window\": 1}\n");
  CHECK(detail::append_whole_line(std::string("a\0b", 3), "x\n") == EINVAL);
  fs::remove_all(dir);
}

TEST_CASE("a summary whose phases chain 20,000 deep reads, renders and is diagnosed in linear space", "[files]") {
  tracer t(testing::quiet());
  {
    scoped_step s(t);
    scoped_phase p(t, builtin::compute);
  }
  summary s = t.summary();
  const int n = 20'000 / testing::scale_divisor;
  const std::string last = "chain." + std::to_string(n - 1);
  for (int i = 0; i < n; ++i) {
    phase_stats p;
    p.name = "chain." + std::to_string(i);
    p.parent = i == 0 ? "compute" : "chain." + std::to_string(i - 1);
    p.calls = 1;
    s.phases.push_back(p);
  }
  const summary back = summary::from_json(s.json());
  const std::string table = back.table();
  // Each row indented at most 12 levels: ~20,000 rows of ~100 bytes (before: 2 spaces a level,
  // 400 MB of them).
  CHECK(table.size() < 8'000'000);
  CHECK(table.find(std::string(2 * 12, ' ') + last) != std::string::npos);
  CHECK(table.find(std::string(2 * 13, ' ') + "chain.") == std::string::npos);
  // Every link followed once: the whole chain counts toward `compute`.
  CHECK(detail::group_share(back, "compute") == Approx(back.phase("compute")->share));
  CHECK(detail::diagnose(back).label == back.diag.label);
  // A cycle of parents ends the walk: no built-in, no hang.
  summary loop = back;
  loop.phases[loop.phases.size() - n].parent = last;
  CHECK(detail::group_share(loop, "compute") == Approx(loop.phase("compute")->share));
  CHECK(loop.table().find("chain.0") != std::string::npos);
}

TEST_CASE("a step with 100,000 phase spans becomes a trace in O(n log n), idle cut along its phases", "[files]") {
  const int n = 100'000 / testing::scale_divisor;
  summary s;
  timeline_step& st = s.timeline.steps.emplace_back();
  st.begin_ms = 0;
  st.end_ms = 2.0 * n;
  st.device_known = true;
  for (int i = 0; i < n; ++i) {  // back to back, 1 ms each, a nested one inside every tenth
    st.phases.push_back({"outer", static_cast<double>(2 * i), static_cast<double>(2 * i + 1), 0});
    if (i % 10 == 0) st.phases.push_back({"inner", 2 * i + 0.25, 2 * i + 0.75, 1});
  }
  st.device.push_back({"kernel", 0, 1, 7, 2.0 * n - 0.5, 2.0 * n, 0});  // idle for all but the last 0.5 ms
  const std::string trace = s.trace();
  // Idle pieces: each outer phase (or its halves around an inner one), each inner, each gap ("other").
  std::size_t outer = 0, inner = 0, other = 0;
  for (std::size_t at = 0; (at = trace.find("\"GPU idle: ", at)) != std::string::npos; ++at) {
    const std::string_view what(trace.data() + at + 11, 5);
    outer += what == "outer";
    inner += what == "inner";
    other += what == "other";
  }
  CHECK(inner == static_cast<std::size_t>(n / 10));
  CHECK(outer == static_cast<std::size_t>(n + n / 10));
  CHECK(other == static_cast<std::size_t>(n));
}

// Requests (steptrace/request.hpp): steps that cross threads and interleave. Ground truth is
// steady_clock, stamped right beside each phase boundary.
#include <algorithm>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "helpers.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
using steptrace::testing::quiet;
using steptrace::testing::spin_for;
using clock_type = std::chrono::steady_clock;
using std::chrono::microseconds;

namespace {

template <class T>
class queue {
 public:
  void push(T v) {
    {
      std::lock_guard<std::mutex> lock(m_);
      q_.push_back(std::move(v));
    }
    cv_.notify_one();
  }
  T pop() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return !q_.empty(); });
    T v = std::move(q_.front());
    q_.pop_front();
    return v;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<T> q_;
};

double ms_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The p50 as steptrace takes it: the nearest rank, ceil(n/2). Queue times jump where a thread was
// preempted, so the value one rank up (what v[n/2] is for an even n) can be a whole preemption
// away: under ASan on a busy machine it was 8.4 ms from steptrace's p50 of the same requests.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[(v.size() + 1) / 2 - 1];
}

struct job {
  std::unique_ptr<request> r;
  int index = 0;
  clock_type::time_point queued;
  double truth_queue = 0, truth_pre = 0, truth_infer = 0;
};

}  // namespace

TEST_CASE("requests that cross three threads: each phase's p50 matches the truth stamped beside it",
          "[requests][threads]") {
  tracer t(quiet());
  const phase_id queue_id = register_phase("queue"), pre = register_phase("preprocess"),
                 infer = register_phase("inference");
  constexpr int n = 240;
  queue<std::unique_ptr<job>> to_pool, to_worker, done;

  std::thread io([&] {  // creates each request and leaves it waiting in the queue
    for (int i = 0; i < n; ++i) {
      auto j = std::make_unique<job>();
      j->index = i;
      j->r = std::make_unique<request>(t);
      j->r->begin_phase(queue_id);
      j->queued = clock_type::now();
      to_pool.push(std::move(j));
      if (i % 8 == 7) std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
  });
  std::thread pool([&] {  // preprocessing: 0.3, 0.6 or 0.9 ms by request
    for (int i = 0; i < n; ++i) {
      auto j = to_pool.pop();
      j->r->end_phase(queue_id);
      j->truth_queue = ms_between(j->queued, clock_type::now());
      const auto a = clock_type::now();
      j->r->begin_phase(pre);
      spin_for(microseconds(300 * (1 + j->index % 3)));
      j->r->end_phase(pre);
      j->truth_pre = ms_between(a, clock_type::now());
      to_worker.push(std::move(j));
    }
  });
  std::thread worker([&] {  // inference 1.2 ms, then the answer
    for (int i = 0; i < n; ++i) {
      auto j = to_worker.pop();
      const auto a = clock_type::now();
      {
        request_phase p(*j->r, infer);
        spin_for(microseconds(1200));
      }
      j->truth_infer = ms_between(a, clock_type::now());
      done.push(std::move(j));
    }
  });
  std::vector<double> tq, tp, ti;
  std::thread answer([&] {  // a fourth thread ends each request
    for (int i = 0; i < n; ++i) {
      auto j = done.pop();
      j->r->end();
      tq.push_back(j->truth_queue);
      tp.push_back(j->truth_pre);
      ti.push_back(j->truth_infer);
    }
  });
  io.join();
  pool.join();
  worker.join();
  answer.join();

  const summary s = t.summary();
  REQUIRE(s.steps == static_cast<std::uint64_t>(n));  // none lost
  CHECK(s.requests == static_cast<std::uint64_t>(n));
  CHECK(s.errors.unbalanced_phases == 0);
  CHECK(s.errors.requests_abandoned == 0);
  for (auto [name, truth] : {std::pair{"queue", &tq}, std::pair{"preprocess", &tp}, std::pair{"inference", &ti}}) {
    const phase_stats* p = s.phase(name);
    REQUIRE(p != nullptr);
    CHECK(p->calls == static_cast<std::uint64_t>(n));  // none mixed into another request
    const double want = median(*truth);
    INFO(name << ": steptrace p50 " << p->ms.p50 << " ms, truth p50 " << want << " ms");
    CHECK(std::abs(p->ms.p50 - want) <= 0.05 * want + 0.01);
  }
}

TEST_CASE("a hundred requests open at once on one thread keep their own phases", "[requests]") {
  tracer t(quiet());
  const phase_id a = register_phase("request.a"), b = register_phase("request.b");
  std::vector<request> open;
  open.reserve(100);
  for (int i = 0; i < 100; ++i) open.emplace_back(t);
  // Interleaved: every request's `a`, then every request's `b`; only even requests do `b`.
  for (auto& r : open) r.begin_phase(a);
  for (auto& r : open) r.end_phase(a);
  for (std::size_t i = 0; i < open.size(); i += 2) open[i].begin_phase(b);
  for (std::size_t i = 0; i < open.size(); i += 2) open[i].end_phase(b);
  {
    scoped_step own(t);  // the thread's own step, meanwhile: independent of the requests
    scoped_phase p(t, b);
  }
  for (auto& r : open) r.end();
  const summary s = t.summary();
  CHECK(s.steps == 101);
  CHECK(s.requests == 100);
  CHECK(s.phase("request.a")->calls == 100);
  CHECK(s.phase("request.b")->calls == 51);
  CHECK(s.errors.unbalanced_phases == 0);
}

TEST_CASE("a request's blocks straddle a small ring's wrap and its own drains without loss", "[requests]") {
  config c = quiet();
  c.ring_records = 64;  // a request of 60 records nearly fills it
  tracer t(c);
  const phase_id p = register_phase("request.p");
  for (int i = 0; i < 50; ++i) {
    request r(t);
    for (int k = 0; k < 29; ++k) {
      r.begin_phase(p);
      r.end_phase(p);
    }
    r.end();
  }
  const summary s = t.summary();
  CHECK(s.steps == 50);
  CHECK(s.phase("request.p")->calls == 50 * 29);
}

TEST_CASE("abandoned requests, phases past capacity and phases left open are counted, never mixed", "[requests]") {
  tracer t(quiet());
  const phase_id p = register_phase("request.p"), q = register_phase("request.q");
  { request dropped(t); }  // never ended
  request moved(t);
  request kept(std::move(moved));  // a moved-from handle is empty: nothing to abandon
  CHECK_FALSE(moved.open());
  kept.begin_phase(q);                               // left open: closed by end()
  for (int k = 0; k < 40; ++k) kept.begin_phase(p);  // nested 40 deep: past the capacity
  for (int k = 0; k < 40; ++k) kept.end_phase(p);
  kept.end();
  kept.end();  // a second end records nothing
  kept.begin_phase(p);
  const summary s = t.summary();
  CHECK(s.steps == 1);
  CHECK(s.errors.requests_abandoned == 1);
  CHECK(s.errors.request_phases_dropped > 0);
  CHECK(s.errors.request_phases_dropped < 40);
  CHECK(s.phase("request.q")->calls == 1);
  CHECK(s.errors.unbalanced_phases == 0);
  // Every kept begin found its end: the nested calls recorded are those that fit.
  CHECK(s.phase("request.p")->calls + s.errors.request_phases_dropped == 40);
}

TEST_CASE("requests on a disabled tracer record nothing", "[requests]") {
  config c = quiet();
  c.enabled = false;
  tracer t(c);
  request r(t);
  CHECK_FALSE(r.open());
  r.end();
  CHECK(t.summary().steps == 0);
}

TEST_CASE("a batch step is counted apart from requests, with its size", "[requests]") {
  tracer t(quiet());
  const phase_id run = register_phase("batch.run");
  for (int size : {4, 8, 8, 16}) {
    scoped_step b(t);
    t.set_batch_size(static_cast<std::uint32_t>(size));
    scoped_phase p(t, run);
  }
  request r(t);
  r.end();
  const summary s = t.summary();
  CHECK(s.steps == 1);  // the request only
  REQUIRE(s.batches.has_value());
  CHECK(s.batches->batches == 4);
  CHECK(s.batches->size_mean == Approx(9.0));
  CHECK(s.batches->size_max == 16);
  CHECK(s.batches->size_p50 == 8);
  bool has_run = false;
  for (const auto& p : s.batches->phases) has_run = has_run || (p.name == "batch.run" && p.calls == 4);
  CHECK(has_run);
}

TEST_CASE("batches and requests that share a builder each have their own warm-up", "[requests]") {
  tracer t(quiet(/*warmup=*/2));
  for (int i = 0; i < 6; ++i) {  // an asyncio worker's batches are requests too, interleaved
    request batch(t);
    batch.set_batch_size(4);
    batch.end();
    request(t).end();
  }
  const summary s = t.summary();
  CHECK(s.steps == 4);         // 6 requests less their 2 warm-up, whatever the batches did
  CHECK(s.warmup_steps == 2);  // the batches' warm-up is counted with the batches, apart
  REQUIRE(s.batches.has_value());
  CHECK(s.batches->batches == 4);
}

TEST_CASE("metrics(): counts only grow, quantiles cover the latest steps, and reading consumes nothing",
          "[requests][metrics]") {
  tracer t(quiet());
  const phase_id early = register_phase("metrics.early");
  for (int i = 0; i < 4096; ++i) {
    request r(t);
    r.begin_phase(early);
    spin_for(microseconds(2));
    r.end_phase(early);
    r.end();
  }
  const summary first = t.metrics();
  CHECK(first.steps == 4096);
  CHECK(first.phase("metrics.early")->ms.max > 0);
  for (int i = 0; i < 4096; ++i) request(t).end();  // the window now holds only these
  const summary a = t.metrics(), b = t.metrics();
  CHECK(a.steps == 8192);  // since the start: never reset by a read
  CHECK(b.steps == 8192);
  // A second scraper sees the same figures; only the resident-memory gauges are sampled live
  // (the collector samples them at step ends, as often as every 50 ms) and may have moved, or
  // appeared between the two reads: their samples and their HELP and TYPE lines are left out.
  const auto without_memory = [](const std::string& text) {
    std::string out;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t end = std::min(text.find('\n', at), text.size());
      const std::string line = text.substr(at, end - at);
      if (line.find("steptrace_host_resident") == std::string::npos) out.append(line + "\n");
      at = end + 1;
    }
    return out;
  };
  CHECK(a.prometheus().find("steptrace_steps_total 8192") != std::string::npos);
  CHECK(without_memory(a.prometheus()) == without_memory(b.prometheus()));
  const phase_stats* e = a.phase("metrics.early");
  REQUIRE(e != nullptr);
  CHECK(e->ms.total == Approx(first.phase("metrics.early")->ms.total));  // its sum stays
  CHECK(e->ms.max == 0);                                                 // no recent step ran it
  CHECK(e->ms.p99 == 0);
  CHECK(t.summary().steps == 8192);  // nor does it touch the whole-run summary or windows
  CHECK(t.window().steps == 8192);
}

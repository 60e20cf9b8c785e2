// The diagnosis of server runs (requests, batches): its own advice, a request's `queue` counted
// as waiting, and no training-loop words; the thresholds come from the one place they live.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <optional>

#include "report/diagnosis/diagnosis.hpp"
#include "summaries.hpp"

using namespace steptrace;
using steptrace::detail::default_thresholds;
using steptrace::detail::diagnose;
using steptrace::testing::with_facts;
using steptrace::testing::with_shares;

namespace {

summary server_run(std::map<std::string, double> shares, std::optional<batch_stats> batches) {
  summary s = with_shares(std::move(shares));
  s.requests = s.steps;
  s.batches = std::move(batches);
  return s;
}

batch_stats batches_of(double busy, double p50, double max) {
  batch_stats b;
  b.batches = 50;
  b.busy_share = busy;
  b.size_p50 = p50;
  b.size_max = max;
  b.ms.p50 = 4;
  return b;
}

bool mentions_training(const diagnosis& d) {
  std::string all = d.evidence;
  for (const auto& a : d.advice) all += a;
  return all.find("DataLoader") != std::string::npos || all.find("training") != std::string::npos ||
         all.find(".item()") != std::string::npos;
}

}  // namespace

TEST_CASE("server runs: requests queueing while the batch worker idles, or while it is saturated",
          "[diagnosis][server]") {
  const double q = default_thresholds.queue_share;
  const double idle_worker = default_thresholds.worker_busy_share - 0.2;
  const auto waiting = diagnose(server_run({{"queue", q + 0.2}, {"compute", 0.8 - q}}, batches_of(idle_worker, 8, 32)));
  CHECK(waiting.label == "WAIT-HEAVY");  // a request's queue is waiting
  REQUIRE_FALSE(waiting.advice.empty());
  CHECK_THAT(waiting.advice[0], Catch::Matchers::Contains("start a batch as soon as the worker is free"));
  CHECK_THAT(waiting.evidence, Catch::Matchers::Contains("they wait for a batch to form"));
  CHECK_THAT(waiting.evidence, Catch::Matchers::Contains("is waiting in `queue` or `wait`"));  // both count
  CHECK_FALSE(mentions_training(waiting));
  const double in = default_thresholds.input_share + 0.1;
  const auto reading = diagnose(server_run({{"input", in}, {"compute", 1 - in}}, std::nullopt));
  CHECK(reading.label == "INPUT-BOUND");
  CHECK_THAT(reading.evidence, Catch::Matchers::Contains("Requests wait for their input."));
  CHECK_FALSE(mentions_training(reading));

  const auto saturated = diagnose(server_run({{"queue", q + 0.2}, {"compute", 0.8 - q}}, batches_of(0.95, 32, 32)));
  CHECK_THAT(saturated.advice[0], Catch::Matchers::Contains("the batch worker is saturated"));
  CHECK_FALSE(mentions_training(saturated));

  // Below the queue rule: no queue advice; small batches are named instead.
  const auto small = diagnose(server_run({{"queue", q - 0.1}, {"compute", 0.9 - q + 0.1}}, batches_of(0.3, 2, 16)));
  CHECK(small.advice[0].find("start a batch") == std::string::npos);
  CHECK_THAT(small.advice[0], Catch::Matchers::Contains("batches hold p50 2 requests of the 16"));
}

TEST_CASE("server runs: preprocessing on the request path is named from its threshold", "[diagnosis][server]") {
  const double p = default_thresholds.preprocess_share;
  const auto at = diagnose(server_run({{"preprocess", p}, {"compute", 1 - p}}, std::nullopt));
  bool named = false;
  for (const auto& a : at.advice) named = named || a.find("`preprocess` takes") != std::string::npos;
  CHECK(named);
  const auto below_it = diagnose(server_run({{"preprocess", p - 0.01}, {"compute", 1 - p + 0.01}}, std::nullopt));
  for (const auto& a : below_it.advice) CHECK(a.find("`preprocess` takes") == std::string::npos);
  CHECK_FALSE(mentions_training(at));
  // The same shares in a training run keep the training advice, with no server finding.
  for (const auto& a : diagnose(with_shares({{"preprocess", p}, {"compute", 1 - p}})).advice) {
    CHECK(a.find("`preprocess` takes") == std::string::npos);
  }
}

TEST_CASE("server runs: the oversubscribed host comes first, and no training-loop advice", "[diagnosis][server]") {
  // Before, the server's advice was filtered by words ("DataLoader"), which dropped the
  // oversubscribed-host line too (it names DataLoader workers among the thread pools).
  const auto oversubscribed = [](std::map<std::string, double> shares) {
    summary s = with_facts(with_shares(std::move(shares)),
                           {{"cpu.cores_busy", "1.0"}, {"cpu.cores_waiting", "0.5"}, {"host.cpus", "2"}});
    s.requests = s.steps;
    return diagnose(s);
  };
  for (const auto& d :
       {oversubscribed({{"compute", 0.9}}), oversubscribed({{"input", 0.6}, {"compute", 0.4}}),
        oversubscribed({{"wait", 0.6}, {"compute", 0.4}}), oversubscribed({{"input", 0.2}, {"compute", 0.6}})}) {
    REQUIRE_FALSE(d.advice.empty());
    CHECK_THAT(d.advice.at(0), Catch::Matchers::Contains("free the cores first") &&
                                   Catch::Matchers::Contains("worker pools") &&
                                   Catch::Matchers::Contains("every request waits"));
    CHECK_FALSE(mentions_training(d));
  }
  const auto secondary = oversubscribed({{"input", 0.2}, {"compute", 0.6}});
  const auto said = [&](const std::string& words) {
    return std::any_of(secondary.advice.begin(), secondary.advice.end(),
                       [&](const std::string& a) { return a.find(words) != std::string::npos; });
  };
  CHECK(said("also: `input` holds 20% of each request: read and decode request input off the request path"));
  CHECK(said("also: 20% of each request is outside every phase"));
}

// The backend on a machine without a GPU: it says why, and steptrace keeps running host-only.
// On a GPU machine these checks are replaced by tests/gpu (scripts/gpu).
#include <catch2/catch.hpp>

#include "gpu/backend.hpp"
#include "helpers.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;

TEST_CASE("without a driver the summary is host-only and says why", "[gpu]") {
  tracer t(steptrace::testing::quiet());
  for (int i = 0; i < 3; ++i) {
    scoped_step step(t);
    scoped_phase p(t, builtin::compute);
  }
  const summary s = t.summary();
  CHECK(s.steps == 3);
  if (!steptrace::testing::driver_here()) {
    CHECK(!s.backend.cuda);
    CHECK(!s.backend.cupti);
    CHECK_THAT(s.backend.reason, Catch::Matchers::Contains("host only: no NVIDIA driver"));
    CHECK(!s.gpu.has_value());
  }
  CHECK(detail::gpu_backend_started());
}

TEST_CASE("a step and a phase given the default stream record like plain ones without a driver", "[gpu]") {
  tracer t(steptrace::testing::quiet());
  for (int i = 0; i < 4; ++i) {
    scoped_step step(t, nullptr);  // nullptr: the legacy default stream, not "no stream"
    CHECK(step.state() == step_open::opened);
    scoped_phase p(t, builtin::compute, nullptr);
  }
  const summary s = t.summary();
  CHECK(s.steps == 4);
  REQUIRE(s.phase("compute") != nullptr);
  CHECK(s.phase("compute")->calls == 4);
  if (!steptrace::testing::driver_here()) {
    CHECK_FALSE(s.step_device_ms.has_value());
    CHECK_FALSE(s.phase("compute")->device_ms.has_value());
  }
}

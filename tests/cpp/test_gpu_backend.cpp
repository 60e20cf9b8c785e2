// The backend on a machine without a GPU: it says why, and steptrace keeps running host-only.
// On a GPU machine these checks are replaced by tests/gpu (scripts/gpu).
#include <catch2/catch.hpp>
#include <cstdlib>

#include "gpu/backend.hpp"
#include "helpers.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;

namespace {

bool has_driver() { return std::getenv("STEPTRACE_TEST_HAS_GPU") != nullptr; }

}  // namespace

TEST_CASE("without a driver the summary is host-only and says why", "[gpu]") {
  tracer t(steptrace::testing::quiet());
  for (int i = 0; i < 3; ++i) {
    scoped_step step(t);
    scoped_phase p(t, builtin::compute);
  }
  const summary s = t.summary();
  CHECK(s.steps == 3);
  if (!has_driver()) {
    CHECK(!s.backend.cuda);
    CHECK(!s.backend.cupti);
    CHECK_THAT(s.backend.reason, Catch::Matchers::Contains("host only: no NVIDIA driver"));
    CHECK(!s.gpu.has_value());
  }
  CHECK(detail::gpu_backend_started());
}

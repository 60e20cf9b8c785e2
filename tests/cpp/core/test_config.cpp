#include <catch2/catch.hpp>
#include <cstdlib>
#include <stdexcept>

#include "steptrace/tracer.hpp"

using Catch::Matchers::Contains;
using steptrace::config;

namespace {

struct scoped_env {
  const char* name;
  scoped_env(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~scoped_env() { unsetenv(name); }
};

}  // namespace

TEST_CASE("options are set from their text form", "[config]") {
  config c;
  c.set("warmup_steps", "12");
  c.set("enabled", "off");
  c.set("print_at_exit", "Yes");
  c.set("log_level", "ERROR");
  c.set("ring_records", "1024");
  c.set("json_path", "/tmp/run.json");
  CHECK(c.warmup_steps == 12);
  CHECK(!c.enabled);
  CHECK(c.print_at_exit == steptrace::exit_print::always);
  CHECK(c.log_level == "error");
  CHECK(c.ring_records == 1024);
  CHECK(c.json_path == "/tmp/run.json");
}

TEST_CASE("an unknown option or a bad value is an error naming it", "[config][errors]") {
  config c;
  CHECK_THROWS_WITH(c.set("warmup", "3"), Contains("unknown option 'warmup'") && Contains("warmup_steps"));
  CHECK_THROWS_WITH(c.set("warmup_steps", "-1"), Contains("'warmup_steps'") && Contains("non-negative integer"));
  CHECK_THROWS_WITH(c.set("warmup_steps", "2.5"), Contains("'2.5'"));
  CHECK_THROWS_WITH(c.set("warmup_steps", "99999999999"), Contains("'warmup_steps'"));
  CHECK_THROWS_WITH(c.set("enabled", "maybe"), Contains("boolean"));
  CHECK_THROWS_WITH(c.set("log_level", "loud"), Contains("trace, debug, info, warn, error, off"));
  CHECK_THROWS_WITH(c.set("ring_records", "1000"), Contains("power of two"));
  CHECK_THROWS_WITH(c.set("ring_records", "32"), Contains("power of two"));
  CHECK(c.warmup_steps == 5);  // nothing changed by a refused value
}

TEST_CASE("a tracer refuses a config holding a bad value", "[config][errors]") {
  config c;
  c.ring_records = 100;
  CHECK_THROWS_AS(steptrace::tracer(c), std::invalid_argument);
  steptrace::tracer t;
  c = config{};
  c.log_level = "chatty";
  CHECK_THROWS_WITH(t.configure(c), Contains("log_level"));
}

TEST_CASE("environment variables overlay the defaults and bad ones are skipped with a reason", "[config]") {
  scoped_env a("STEPTRACE_WARMUP_STEPS", "2");
  scoped_env b("STEPTRACE_LOG_LEVEL", "shouting");
  scoped_env c("STEPTRACE_WARMUP", "3");
  std::vector<std::string> errors;
  const config cfg = config::from_env(&errors);
  CHECK(cfg.warmup_steps == 2);
  CHECK(cfg.log_level == "warn");
  REQUIRE(errors.size() == 2);
  CHECK_THAT(errors[0], Contains("STEPTRACE_LOG_LEVEL='shouting' is ignored"));
  CHECK_THAT(errors[1], Contains("STEPTRACE_WARMUP is not a steptrace variable"));
  CHECK_THAT(errors[1], !Contains("did you mean"));  // 6 letters from STEPTRACE_WARMUP_STEPS: no guess
}

TEST_CASE("a variable steptrace reads outside the options table is not called unknown", "[config]") {
  scoped_env nvml("STEPTRACE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");  // loaded in NVML's place
  std::vector<std::string> errors;
  (void)config::from_env(&errors);
  CHECK(errors.empty());
}

TEST_CASE("a misspelt option or variable is answered with the nearest name", "[config][errors]") {
  scoped_env a("STEPTRACE_JSN", "run.json");
  std::vector<std::string> errors;
  (void)config::from_env(&errors);
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0],
             Contains("STEPTRACE_JSN is not a steptrace variable and is ignored (did you mean STEPTRACE_JSON?)"));
  config c;
  CHECK_THROWS_WITH(c.set("capture_bak", "4"), Contains("unknown option 'capture_bak' (did you mean capture_back?)"));
  CHECK_THROWS_WITH(c.set("wramup_steps", "4"), Contains("(did you mean warmup_steps?)"));
}

TEST_CASE("STEPTRACE_DISABLE=1 keeps a tracer off whatever is configured", "[config]") {
  scoped_env off("STEPTRACE_DISABLE", "1");
  steptrace::tracer t;
  CHECK(!t.enabled());
  config c;
  c.enabled = true;
  t.configure(c);
  CHECK(!t.enabled());
  CHECK(t.begin_step() == steptrace::step_open::disabled);
}

TEST_CASE("every option in the table reads back what set() took, and has a variable and a doc", "[config]") {
  config c;
  for (const steptrace::option_info& o : steptrace::options_table()) {
    INFO(o.name);
    CHECK(std::string(o.env).rfind("STEPTRACE_", 0) == 0);
    CHECK(std::string(o.doc).size() > 10);
    CHECK(c.get(o.name) == o.default_text);  // the documented default is the real one
    c.set(o.name, c.get(o.name));
  }
  c.set("print_at_exit", "never");
  CHECK(c.get("print_at_exit") == "never");
  c.set("print_at_exit", "0");
  CHECK(c.print_at_exit == steptrace::exit_print::never);
  CHECK_THROWS_WITH(c.set("print_at_exit", "sometimes"), Contains("auto, always, never"));
  CHECK_THROWS_WITH(c.get("colour"), Contains("unknown option 'colour'") && Contains("cupti"));
}

// steptrace/config.hpp — a tracer's options, each defined once (name, environment variable,
// value rule, meaning) in the table that options_table() returns.
//
//   steptrace::config c = steptrace::config::from_env();   // defaults + STEPTRACE_* variables
//   c.set("warmup_steps", "10");                          // the text form, as the variables use
//   steptrace::tracer t(c);
//
// The same table drives config::set, config::from_env, the error texts, Python's
// configure()/options() and the option list in docs/python.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "steptrace/export.hpp"

namespace steptrace {

// The most steps one capture keeps (the capture_steps option's bound, tracer::capture's).
inline constexpr std::uint32_t max_capture_steps = 1000;

// When the default tracer prints its table at exit.
enum class exit_print : std::uint8_t {
  auto_,   // unless the program already fetched this tracer's summary after its last step
  always,  // every time
  never
};

struct STEPTRACE_API config {
  bool enabled = true;
  std::uint32_t warmup_steps = 5;
  exit_print print_at_exit = exit_print::auto_;
  std::string json_path;
  std::string log_level = "warn";
  std::uint32_t ring_records = 16384;
  bool cupti = true;
  std::uint32_t device_sample = 1;      // CUPTI records one window in this many (1: every one)
  std::uint32_t gather_timeout_s = 60;  // many ranks: how long rank 0 waits for the others
  bool collective_wait = true;          // Python: DDP's gradient all-reduce wait timed as `wait`
  std::uint32_t timeline_recent = 64;   // flight recorder: most recent steps kept per thread
  std::uint32_t timeline_slowest = 8;   // flight recorder: slowest counted steps kept per thread
  std::string trace_path;               // the default tracer writes the timeline's Chrome trace here at exit
  std::string html_path;                // Python: the HTML report, written at exit
  std::uint32_t live = 0;               // seconds between live window lines on stderr (0: none)
  std::string jsonl_path;               // one JSON object per live window appended here
  // Capture on trouble (capture.hpp): a trace of the steps after a window turned bad.
  std::string capture;              // the triggers, comma-separated ("" none): slow[=F], label, signal, file=PATH
  std::uint32_t capture_steps = 5;  // steps each capture records
  std::string capture_dir = "steptrace-captures";
  std::uint32_t capture_max = 3;   // captures per run at most
  std::uint32_t capture_back = 8;  // retroactive capture: steps kept per thread and window (0: none)
  // A step open this long (seconds) is a suspected hang (hang.hpp); 0: automatic, -1: not watched.
  double hang_after_s = 0;
  // The ceiling live (ceiling.hpp): the model's FLOPs a step (0: not told), Python's `count` (FLOPs
  // counted once by FlopCounterMode), and the dtype whose peak MFU is against.
  double flops_per_step = 0;
  std::string flops = "off";
  std::string flops_dtype = "bf16";

  // Sets one option from its text form. Throws std::invalid_argument naming the option and
  // the bad value.
  void set(std::string_view key, std::string_view value);
  // The text form of one option's value (what set() takes back). Throws for an unknown key.
  std::string get(std::string_view key) const;
  // Throws std::invalid_argument, as set() would, if a field holds a value set() refuses.
  void validate() const;
  // Defaults overlaid with STEPTRACE_* environment variables. A bad variable is skipped and
  // described, one line each, in *errors, as is a STEPTRACE_* variable that names no option.
  static config from_env(std::vector<std::string>* errors = nullptr);
};

// One row of the option table. `kind` says which values set() takes:
//   "bool"  1/0, true/false, yes/no, on/off     "uint"  a non-negative integer
//   "text"  any string                          "path"  a file path ("" for none)
//   "seconds"  a number of seconds, `auto` or `off`
//   "choice:a|b|c"  one of the words (booleans are accepted too where doc says so)
struct option_info {
  const char* name;
  const char* env;    // the environment variable that sets it
  bool env_inverted;  // the variable sets the opposite (STEPTRACE_DISABLE=1: enabled=0)
  const char* kind;
  const char* default_text;
  const char* doc;
};
STEPTRACE_API const std::vector<option_info>& options_table();

}  // namespace steptrace

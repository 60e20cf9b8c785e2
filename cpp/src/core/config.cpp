// The option table: each option's name, environment variable, value rule, default and meaning,
// defined here once. config::set / get / from_env, the error texts, Python's configure() and
// options(), and the option list in docs/python.md all read it.
#include "steptrace/config.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>

#include "base/log.hpp"
#include "base/near_name.hpp"
#include "base/utf8.hpp"
#include "gpu/nvml.hpp"

extern char** environ;

namespace steptrace {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool parse_bool(std::string_view v) {
  const std::string s = lower(v);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  throw std::invalid_argument("expected a boolean (1/0, true/false, yes/no, on/off)");
}

std::uint32_t parse_uint(std::string_view v, std::uint32_t max) {
  if (v.empty() || v.size() > 10 || !std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); })) {
    throw std::invalid_argument("expected a non-negative integer");
  }
  const std::uint64_t n = std::stoull(std::string(v));
  if (n > max) throw std::invalid_argument("expected at most " + std::to_string(max));
  return static_cast<std::uint32_t>(n);
}

const char* bool_text(bool b) { return b ? "1" : "0"; }

// The capture triggers: comma-separated, each `slow` or `slow=F` (F > 1: a window's step p95 and p50 over
// F times the run's baseline), `stall` or `stall=F` (one step over F times the baseline p50), `label`, `straggler`,
// `phase=NAME>SHARE`, `signal` (SIGUSR2) or `file=PATH` (a file touched there). What each does is capture_rule's
// (core/capture/capture_rule.cpp) and, for straggler and signal in Python, steptrace/_capture.py's; here only which
// words are known.
std::string shown(std::string_view v);  // below: a value as an error message shows it

std::string parse_capture(std::string_view v) {
  std::size_t at = 0;
  while (at < v.size()) {
    std::size_t comma = v.find(',', at);
    if (comma == std::string_view::npos) comma = v.size();
    std::string_view item = v.substr(at, comma - at);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    const std::size_t eq = item.find('=');
    const std::string_view word = item.substr(0, eq), arg = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    bool ok = false;
    if (word == "slow" || word == "stall") {
      char* end = nullptr;
      const std::string number(arg);
      const double f = arg.empty() ? 2.0 : std::strtod(number.c_str(), &end);
      ok = (arg.empty() || (end != nullptr && *end == '\0')) && f > 1.0 && f < 1e6;
    } else if (word == "label" || word == "signal" || word == "straggler") {
      ok = eq == std::string_view::npos;
    } else if (word == "file") {
      ok = !arg.empty() && arg.find('\0') == std::string_view::npos;
    } else if (word == "phase") {  // phase=NAME>SHARE: a built-in phase's share of the step over SHARE
      const std::size_t gt = arg.find('>');
      const std::string share(gt == std::string_view::npos ? "" : arg.substr(gt + 1));
      char* end = nullptr;
      const double f = share.empty() ? 0 : std::strtod(share.c_str(), &end);
      const std::string_view name = arg.substr(0, gt);
      ok = (name == "input" || name == "h2d" || name == "compute" || name == "wait" || name == "other") &&
           end != nullptr && *end == '\0' && f > 0 && f < 1;
    }
    if (!ok) {
      throw std::invalid_argument(
          "expected triggers separated by commas: slow, slow=F (F > 1), stall, stall=F "
          "(F > 1), label, straggler, "
          "phase=NAME>SHARE (a built-in phase, 0 < SHARE < 1), signal, file=PATH; not '" +
          shown(item) + "'");
    }
    at = comma + 1;
  }
  return std::string(v);
}

// hang_after: `auto` (0), `off` (-1) or seconds (0.1 to a week).
double parse_hang_after(std::string_view v) {
  const std::string s = lower(v);
  if (s == "auto") return 0;
  if (s == "off") return -1;
  char* end = nullptr;
  const double f = s.empty() ? 0 : std::strtod(s.c_str(), &end);
  if (end == nullptr || *end != '\0' || !(f >= 0.1 && f <= 604800)) {
    throw std::invalid_argument("expected seconds (0.1 to 604800), auto or off");
  }
  return f;
}

std::string fmt_seconds(double s) {  // and FLOPs: the shortest text that reads back the same
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", s);
  char shorter[32];
  std::snprintf(shorter, sizeof shorter, "%g", s);
  if (std::strtod(shorter, nullptr) == s) return shorter;
  return text;
}

std::string parse_path(std::string_view v) {
  if (v.find('\0') != std::string_view::npos) {  // the C library would stop there: another file
    throw std::invalid_argument("a path cannot hold a NUL byte");
  }
  return std::string(v);
}

// A value as an error message shows it: printable, and at most 60 characters of it.
std::string shown(std::string_view v) {
  std::string text = detail::escaped_utf8(v.substr(0, 240));
  if (text.size() > 60 || v.size() > 240) text = text.substr(0, 57) + "...";
  return text;
}

struct option {
  option_info info;
  std::function<void(config&, std::string_view)> set;  // throws std::invalid_argument: why
  std::function<std::string(const config&)> get;
};

const std::vector<option>& options() {
  static const std::vector<option> table = {
      {{"enabled", "STEPTRACE_DISABLE", true, "bool", "1",
        "0: every call is a no-op. STEPTRACE_DISABLE=1 keeps every tracer off, whatever is configured."},
       [](config& c, std::string_view v) { c.enabled = parse_bool(v); },
       [](const config& c) { return std::string(bool_text(c.enabled)); }},
      {{"warmup_steps", "STEPTRACE_WARMUP_STEPS", false, "uint", "5",
        "first steps of each thread, recorded but kept out of the statistics (at most 1000000)"},
       [](config& c, std::string_view v) { c.warmup_steps = parse_uint(v, 1'000'000); },
       [](const config& c) { return std::to_string(c.warmup_steps); }},
      {{"print_at_exit", "STEPTRACE_PRINT_AT_EXIT", false, "choice:auto|always|never", "auto",
        "the default tracer's table at exit: auto prints it unless the program already showed the "
        "summary after its last step (Python: printed it or took its JSON text; C++: fetched it), then one line "
        "says so; 1/true means always, 0/false never"},
       [](config& c, std::string_view v) {
         const std::string s = lower(v);
         if (s == "auto") {
           c.print_at_exit = exit_print::auto_;
         } else if (s == "always") {
           c.print_at_exit = exit_print::always;
         } else if (s == "never") {
           c.print_at_exit = exit_print::never;
         } else {
           try {
             c.print_at_exit = parse_bool(s) ? exit_print::always : exit_print::never;
           } catch (const std::invalid_argument&) {
             throw std::invalid_argument("expected auto, always, never or a boolean");
           }
         }
       },
       [](const config& c) {
         return std::string(c.print_at_exit == exit_print::auto_    ? "auto"
                            : c.print_at_exit == exit_print::always ? "always"
                                                                    : "never");
       }},
      {{"json_path", "STEPTRACE_JSON", false, "path", "",
        "the default tracer also writes the summary JSON here at exit (written whole or not at all)"},
       [](config& c, std::string_view v) { c.json_path = parse_path(v); },
       [](const config& c) { return c.json_path; }},
      {{"log_level", "STEPTRACE_LOG_LEVEL", false, "choice:trace|debug|info|warn|error|off", "warn",
        "the least severe message steptrace prints to stderr"},
       [](config& c, std::string_view v) {
         const std::string s = lower(v);
         detail::parse_log_level(s);
         c.log_level = s == "warning" ? "warn" : s;
       },
       [](const config& c) { return c.log_level; }},
      {{"ring_records", "STEPTRACE_RING_RECORDS", false, "uint", "16384",
        "records buffered per thread (16 bytes each): a power of two from 64 to 16777216"},
       [](config& c, std::string_view v) {
         const std::uint32_t n = parse_uint(v, 1u << 24);
         if (n < 64 || (n & (n - 1)) != 0) throw std::invalid_argument("expected a power of two from 64 to 16777216");
         c.ring_records = n;
       },
       [](const config& c) { return std::to_string(c.ring_records); }},
      {{"cupti", "STEPTRACE_CUPTI", false, "bool", "1",
        "collect device activity with CUPTI when a GPU is there (0: CUDA events only)"},
       [](config& c, std::string_view v) { c.cupti = parse_bool(v); },
       [](const config& c) { return std::string(bool_text(c.cupti)); }},
      {{"device_sample", "STEPTRACE_DEVICE_SAMPLE", false, "uint", "1",
        "CUPTI records device activity one live window in this many (1 to 1000; windows of `live` seconds, else "
        "10; every window until one whole window is recorded), under CUPTI's own cost of ~0.25 us of GPU time a "
        "kernel; CUDA events still time every step's phases given a stream, and the device figures, diagnosis "
        "and gains are over the recorded windows' steps, said so. CUPTI is the process's: the tracer that set "
        "it last decides"},
       [](config& c, std::string_view v) {
         c.device_sample = parse_uint(v, 1000);
         if (c.device_sample == 0) throw std::invalid_argument("expected 1 to 1000");
       },
       [](const config& c) { return std::to_string(c.device_sample); }},
      {{"gather_timeout_s", "STEPTRACE_GATHER_TIMEOUT", false, "uint", "60",
        "many ranks (torch.distributed): at exit (and at summary(gather=True)), rank 0 waits at most this many "
        "seconds for the other ranks' summaries, then names the missing ones (at most 86400)"},
       [](config& c, std::string_view v) { c.gather_timeout_s = parse_uint(v, 86'400); },
       [](const config& c) { return std::to_string(c.gather_timeout_s); }},
      {{"collective_wait", "STEPTRACE_COLLECTIVE_WAIT", false, "bool", "1",
        "Python: time the wait at DistributedDataParallel's gradient all-reduce, after backward's own work, as "
        "the `wait` phase of the default tracer"},
       [](config& c, std::string_view v) { c.collective_wait = parse_bool(v); },
       [](const config& c) { return std::string(bool_text(c.collective_wait)); }},
      {{"timeline_recent", "STEPTRACE_TIMELINE_RECENT", false, "uint", "64",
        "the flight recorder keeps the raw intervals of this many most recent steps per thread (at most 4096)"},
       [](config& c, std::string_view v) { c.timeline_recent = parse_uint(v, 4096); },
       [](const config& c) { return std::to_string(c.timeline_recent); }},
      {{"timeline_slowest", "STEPTRACE_TIMELINE_SLOWEST", false, "uint", "8",
        "and of this many slowest counted steps per thread (at most 1024; both 0: no timeline)"},
       [](config& c, std::string_view v) { c.timeline_slowest = parse_uint(v, 1024); },
       [](const config& c) { return std::to_string(c.timeline_slowest); }},
      {{"trace_path", "STEPTRACE_TRACE", false, "path", "",
        "the default tracer writes the timeline as Chrome trace JSON here at exit (Perfetto UI, chrome://tracing); "
        "`{rank}` as for json_path"},
       [](config& c, std::string_view v) { c.trace_path = parse_path(v); },
       [](const config& c) { return c.trace_path; }},
      {{"html_path", "STEPTRACE_HTML", false, "path", "",
        "Python: the HTML report written here at exit (`steptrace report run.json` makes one from any summary); "
        "`{rank}` as for json_path"},
       [](config& c, std::string_view v) { c.html_path = parse_path(v); },
       [](const config& c) { return c.html_path; }},
      {{"live", "STEPTRACE_LIVE", false, "uint", "0",
        "every this many seconds, a line on stderr with the window just ended: steps, step p50/p95, top phases, "
        "label (0: none; at most 86400); also the period of the windows jsonl_path and on_window get"},
       [](config& c, std::string_view v) { c.live = parse_uint(v, 86'400); },
       [](const config& c) { return std::to_string(c.live); }},
      {{"jsonl_path", "STEPTRACE_JSONL", false, "path", "",
        "one JSON object (the window's summary) appended here per live window: every `live` seconds, or every 10 "
        "without it; `{rank}` is the rank's number (each rank its own file)"},
       [](config& c, std::string_view v) { c.jsonl_path = parse_path(v); },
       [](const config& c) { return c.jsonl_path; }},
      {{"capture", "STEPTRACE_CAPTURE", false, "text", "",
        "capture on trouble: a trace of the next capture_steps steps, diagnosed alone (torch.profiler's where "
        "the program imported torch, else steptrace's own records of them), when a "
        "trigger fires: `slow` (a window's step p95 and p50 over 2x the run's baselines; `slow=1.5` sets the factor), "
        "`stall` (one step of a window over 5x the baseline p50 and 100 ms past it, the window's p50 not slow: a "
        "one-off; `stall=F` sets the factor), `label` (the live label changes and holds two windows), `straggler` "
        "(under torch.distributed: the live "
        "rank windows name a new straggler, captured with the median rank on the same steps), "
        "`phase=input>0.3` (a built-in phase's share of the step crosses the bound), `signal` (SIGUSR2), "
        "`file=PATH` (a file touched there); comma-separated "
        "(\"\": none; `steptrace.capture()` captures on demand whatever this says)"},
       [](config& c, std::string_view v) { c.capture = parse_capture(v); },
       [](const config& c) { return c.capture; }},
      {{"capture_steps", "STEPTRACE_CAPTURE_STEPS", false, "uint", "5", "the steps each capture records (1 to 1000)"},
       [](config& c, std::string_view v) {
         c.capture_steps = parse_uint(v, max_capture_steps);
         if (c.capture_steps == 0) throw std::invalid_argument("expected 1 to " + std::to_string(max_capture_steps));
       },
       [](const config& c) { return std::to_string(c.capture_steps); }},
      {{"capture_dir", "STEPTRACE_CAPTURE_DIR", false, "path", "steptrace-captures",
        "where captures are written: `<run>-rank<r>-step<s>-pid<p>.pt.trace.json.gz` (torch.profiler's), "
        "`<program>-rank<r>-step<s>-pid<p>.trace.json` (steptrace's)"},
       [](config& c, std::string_view v) { c.capture_dir = parse_path(v); },
       [](const config& c) { return c.capture_dir; }},
      {{"capture_max", "STEPTRACE_CAPTURE_MAX", false, "uint", "3",
        "captures per run at most (at most 100); after each, the next trigger waits 3 windows"},
       [](config& c, std::string_view v) { c.capture_max = parse_uint(v, 100); },
       [](const config& c) { return std::to_string(c.capture_max); }},
      {{"capture_back", "STEPTRACE_CAPTURE_BACK", false, "uint", "8",
        "retroactive capture: each thread's last this many steps and each of its last 8 windows' this many slowest "
        "are kept whole (at most 64; 0: none); when a trigger fires, the steps that tripped it (a window's "
        "trigger: its slowest; a file, a signal, capture(): the last) are written at once to capture_dir as "
        "`<run>-rank<r>-back-step<s>-pid<p>.trace.json`, before the forward capture"},
       [](config& c, std::string_view v) { c.capture_back = parse_uint(v, 64); },
       [](const config& c) { return std::to_string(c.capture_back); }},
      {{"hang_after", "STEPTRACE_HANG_AFTER", false, "seconds", "auto",
        "a step open this many seconds is a suspected hang: its report (every thread's open phases and "
        "stack, the last collectives) goes to stderr, `jsonl_path` and `capture_dir`, once a hang; `auto`: "
        "the larger of 60 s and 10x the p99 step (600 s before any step is counted: start-up, compiling); "
        "`off`: not watched"},
       [](config& c, std::string_view v) { c.hang_after_s = parse_hang_after(v); },
       [](const config& c) {
         return c.hang_after_s == 0  ? std::string("auto")
                : c.hang_after_s < 0 ? std::string("off")
                                     : fmt_seconds(c.hang_after_s);
       }},
      {{"flops_per_step", "STEPTRACE_FLOPS_PER_STEP", false, "number", "0",
        "the model's FLOPs in one step (multiply-adds count two), for model FLOP/s and MFU against the device's "
        "peak for `flops_dtype` (docs/diagnosis.md, \"The ceiling\"); 0: not told"},
       [](config& c, std::string_view v) {
         const std::string s(v);
         char* end = nullptr;
         const double f = s.empty() ? -1 : std::strtod(s.c_str(), &end);
         if (end == nullptr || *end != '\0' || !(f >= 0 && f <= 1e21))
           throw std::invalid_argument("expected FLOPs (0 to 1e21)");
         c.flops_per_step = f;
       },
       [](const config& c) { return fmt_seconds(c.flops_per_step); }},
      {{"flops", "STEPTRACE_FLOPS", false, "choice:off|count", "off",
        "Python: `count` counts the FLOPs of the next step once, with torch's FlopCounterMode (that step runs "
        "slower: a warm-up step, by default), and sets flops_per_step"},
       [](config& c, std::string_view v) {
         const std::string s = lower(v);
         if (s != "off" && s != "count") throw std::invalid_argument("expected off or count");
         c.flops = s;
       },
       [](const config& c) { return c.flops; }},
      {{"flops_dtype", "STEPTRACE_FLOPS_DTYPE", false, "choice:bf16|fp16|fp32|tf32|fp8", "bf16",
        "the dtype whose peak a live run's MFU is against"},
       [](config& c, std::string_view v) {
         const std::string s = lower(v);
         if (s != "bf16" && s != "fp16" && s != "fp32" && s != "tf32" && s != "fp8") {
           throw std::invalid_argument("expected bf16, fp16, fp32, tf32 or fp8");
         }
         c.flops_dtype = s;
       },
       [](const config& c) { return c.flops_dtype; }},
  };
  return table;
}

std::string known_names() {
  std::string out;
  for (const option& o : options()) out += (out.empty() ? "" : ", ") + std::string(o.info.name);
  return out;
}

const option& find(std::string_view key) {
  for (const option& o : options()) {
    if (key == o.info.name) return o;
  }
  std::vector<std::string_view> names;
  for (const option& o : options()) names.push_back(o.info.name);
  const std::string near = detail::did_you_mean(key, names);
  throw std::invalid_argument("steptrace: unknown option '" + shown(key) + "'" + near +
                              (near.empty() ? " (known: " + known_names() + ")" : ""));
}

}  // namespace

const std::vector<option_info>& options_table() {
  static const std::vector<option_info> infos = [] {
    std::vector<option_info> out;
    for (const option& o : options()) out.push_back(o.info);
    return out;
  }();
  return infos;
}

void config::set(std::string_view key, std::string_view value) {
  const option& o = find(key);
  try {
    o.set(*this, value);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("steptrace: bad value '" + shown(value) + "' for option '" + shown(key) +
                                "': " + e.what());
  }
}

std::string config::get(std::string_view key) const { return find(key).get(*this); }

void config::validate() const {
  config probe;
  for (const option& o : options()) probe.set(o.info.name, o.get(*this));
}

config config::from_env(std::vector<std::string>* errors) {
  config cfg;
  for (const option& o : options()) {
    const char* value = std::getenv(o.info.env);
    if (value == nullptr) continue;
    try {
      o.set(cfg, o.info.env_inverted ? bool_text(!parse_bool(value)) : value);
    } catch (const std::invalid_argument& e) {
      if (errors) errors->push_back(std::string(o.info.env) + "='" + shown(value) + "' is ignored: " + e.what());
    }
  }
  if (errors) {  // a misspelt variable would otherwise be silently without effect
    for (char** e = environ; e && *e; ++e) {
      const std::string_view entry(*e);
      if (entry.rfind("STEPTRACE_", 0) != 0) continue;
      const std::string_view name = entry.substr(0, entry.find('='));
      const bool known =
          name == detail::nvml_library_variable ||  // read where it is used, not an option
          std::any_of(options().begin(), options().end(), [&](const option& o) { return name == o.info.env; });
      if (!known) {
        std::vector<std::string_view> envs;
        for (const option& o : options()) envs.push_back(o.info.env);
        errors->push_back(shown(name) + " is not a steptrace variable and is ignored" +
                          detail::did_you_mean(name, envs));
      }
    }
  }
  return cfg;
}

}  // namespace steptrace

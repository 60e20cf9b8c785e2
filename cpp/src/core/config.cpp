// The one place where option names, environment variables and value rules live.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "core/log.hpp"
#include "steptrace/tracer.hpp"

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

std::uint64_t parse_uint(std::string_view v, std::uint64_t max) {
  if (v.empty() || v.size() > 12 || !std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); })) {
    throw std::invalid_argument("expected a non-negative integer");
  }
  const std::uint64_t n = std::stoull(std::string(v));
  if (n > max) throw std::invalid_argument("expected at most " + std::to_string(max));
  return n;
}

struct env_var {
  const char* name;
  const char* option;
  bool inverted;  // STEPTRACE_DISABLE=1 means enabled=0
};
constexpr env_var env_vars[] = {
    {"STEPTRACE_DISABLE", "enabled", true},
    {"STEPTRACE_WARMUP_STEPS", "warmup_steps", false},
    {"STEPTRACE_PRINT_AT_EXIT", "print_at_exit", false},
    {"STEPTRACE_JSON", "json_path", false},
    {"STEPTRACE_LOG_LEVEL", "log_level", false},
    {"STEPTRACE_RING_RECORDS", "ring_records", false},
    {"STEPTRACE_CUPTI", "cupti", false},
};

constexpr std::string_view option_names[] = {"enabled",   "warmup_steps", "print_at_exit", "json_path",
                                             "log_level", "ring_records", "cupti"};

}  // namespace

void config::set(std::string_view key, std::string_view value) {
  if (std::find(std::begin(option_names), std::end(option_names), key) == std::end(option_names)) {
    throw std::invalid_argument("steptrace: unknown option '" + std::string(key) +
                                "' (known: enabled, warmup_steps, print_at_exit, json_path, log_level, ring_records, cupti)");
  }
  try {
    if (key == "enabled") {
      enabled = parse_bool(value);
    } else if (key == "warmup_steps") {
      warmup_steps = static_cast<std::uint32_t>(parse_uint(value, 1'000'000));
    } else if (key == "print_at_exit") {
      print_at_exit = parse_bool(value);
    } else if (key == "json_path") {
      json_path = std::string(value);
    } else if (key == "log_level") {
      detail::parse_log_level(lower(value));
      log_level = lower(value);
    } else if (key == "cupti") {
      cupti = parse_bool(value);
    } else if (key == "ring_records") {
      const auto n = parse_uint(value, 1u << 24);
      if (n < 64 || (n & (n - 1)) != 0) throw std::invalid_argument("expected a power of two from 64 to 16777216");
      ring_records = static_cast<std::uint32_t>(n);
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("steptrace: bad value '" + std::string(value) + "' for option '" + std::string(key) +
                                "': " + e.what());
  }
}

void config::validate() const {
  config probe;
  probe.set("warmup_steps", std::to_string(warmup_steps));
  probe.set("log_level", log_level);
  probe.set("ring_records", std::to_string(ring_records));
}

config config::from_env(std::vector<std::string>* errors) {
  config cfg;
  for (const env_var& var : env_vars) {
    const char* value = std::getenv(var.name);
    if (value == nullptr) continue;
    try {
      if (var.inverted) {
        cfg.enabled = !parse_bool(value);
      } else {
        cfg.set(var.option, value);
      }
    } catch (const std::invalid_argument& e) {
      if (errors) {
        std::string why = e.what();
        if (const auto colon = why.rfind(": "); colon != std::string::npos) why = why.substr(colon + 2);
        errors->push_back(std::string(var.name) + "='" + value + "' is ignored: " + why);
      }
    }
  }
  if (errors) {  // a misspelt variable would otherwise be silently without effect
    for (char** e = environ; e && *e; ++e) {
      const std::string_view entry(*e);
      if (entry.rfind("STEPTRACE_", 0) != 0) continue;
      const std::string_view name = entry.substr(0, entry.find('='));
      const bool known = std::any_of(std::begin(env_vars), std::end(env_vars),
                                     [&](const env_var& v) { return name == v.name; });
      if (!known) errors->push_back(std::string(name) + " is not a steptrace variable and is ignored");
    }
  }
  return cfg;
}

}  // namespace steptrace

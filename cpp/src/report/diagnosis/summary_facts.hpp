// Internal (not public API): what a summary says, read for the diagnosis rules. The built-in
// group each phase counts toward (a custom phase counts toward the built-in it sits in, so
// detail never changes a label), and the facts the tracer was told (summary::facts) as numbers.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "steptrace/phase.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

// The phase a request waits in for a batch (or any stage): counted toward `wait`.
inline constexpr std::string_view queue_phase = "queue";
using steptrace::collective_phase;  // the host in a CPU collective, inside `wait` (steptrace/phase.hpp)
// Time set aside as one-time initialisation (a trace's context creation, module loads): named,
// never the subject of advice.
inline constexpr std::string_view one_time_phase = "initialisation";

// One of the five built-in phases: input, h2d, compute, wait, other.
bool is_builtin(std::string_view name);

// The built-in phase each phase counts toward (index-aligned with s.phases): itself if built-in,
// else the nearest built-in it was opened inside; empty for a custom phase outside every one.
// Linear in the phases whatever the depth of a chain, and safe on a cycle read from a file.
std::vector<std::string_view> builtin_groups(const summary& s);

// The share of step time of built-in phase `name` with every custom phase that counts toward
// it (opened inside it, at any depth): the grouping every rule reads.
double group_share(const summary& s, std::string_view name);
// The same as mean milliseconds per step.
double mean_of(const summary& s, std::string_view name);

// The GPU's idle time during each built-in phase group, as shares of step time (a custom phase
// outside every built-in counts as compute). All 0 without a device view.
struct idle_groups {
  double input = 0, h2d = 0, compute = 0, wait = 0, other = 0;
  double collective = 0;  // of `wait`, the part in CPU collectives
};
idle_groups idle_by_group(const summary& s);

// A fact as a number or a flag; empty when absent or not one.
std::optional<double> fact_double(const summary& s, std::string_view key);
std::optional<long> fact_int(const summary& s, std::string_view key);
std::optional<bool> fact_bool(const summary& s, std::string_view key);

// Cores the process and its workers asked for over the run: running plus waiting for a core.
// Empty when the CPU figures are missing.
std::optional<double> cpu_demand(const summary& s);

}  // namespace steptrace::detail

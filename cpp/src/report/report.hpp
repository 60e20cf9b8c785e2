// Internal (not public API): what the report layer adds to measured numbers.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "steptrace/summary.hpp"

namespace steptrace::detail {

// Adds the diagnosis to a summary whose numbers are filled in.
void complete(summary& s);
// summary::json() on one line (a JSON Lines record).
std::string summary_json_line(const summary& s);
// The table's section on a profiler run's cycles, a line at a time (cycles.cpp).
void cycle_lines(const std::vector<cycle_row>& cycles, const std::function<void(std::string)>& line);
// The table's ranks section (rank_table.cpp): rank 0's row per rank, and the live windows' stragglers.
void rank_lines(const ranks_view& v, const std::function<void(std::string)>& line);
void live_rank_lines(const live_ranks_view& v, const std::function<void(std::string)>& line);
// The table's device block lines on kernels, ops and kinds (kernels.cpp).
void kernel_lines(const kernel_stats& k, const std::function<void(std::string)>& line);
// The ceiling (ceiling_lines.cpp): the table's lines, and show --kernels' roofline rows.
void ceiling_lines(const ceiling_stats& c, const std::function<void(std::string)>& line);
std::string ceiling_table_text(const ceiling_stats& c);
// Live rank windows (ranks.cpp): "rank 17 slowest in 41 of 48 windows (input): chronic", "rank 3
// once, window 12 (wait): one-off".
std::string live_rank_words(const rank_window_count& c, std::uint64_t windows);
// A hang (hang_report.cpp): a process's lines on stderr, its report file (with the stacks and the
// job's view, when known), and the usual causes of being stuck in the innermost built-in phase open.
std::string hang_lines(const hang_view& v, const std::optional<rank_info>& who);
std::string hang_report_text(const hang_view& v, const std::optional<rank_info>& who, std::string_view stacks,
                             std::string_view job);
std::string seconds_text(double s);  // "3.9 s", "62 s": a hang's durations as its words say them
std::string stuck_phase_causes(const std::vector<open_phase_now>& phases, bool in_collective = false);
// The live view's line for one window: steps, step p50/p95, the largest phases, the label.
std::string live_line(const summary& window, double at_s);

}  // namespace steptrace::detail

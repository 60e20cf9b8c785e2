// The capture triggers weighed on each live window, and the lines a capture says: one rule for
// the C++ collector and for Python's window thread (cpp/src/core/README.md, "Capture on trouble").
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "steptrace/capture.hpp"
#include "steptrace/config.hpp"

namespace steptrace {
namespace {

double median3(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool mtime(const std::string& path, double& out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  out = static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9;
  return true;
}

std::string percent(double share) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * share);
  return text;
}

}  // namespace

capture_rule::capture_rule(std::string_view spec) {
  config check;
  check.set("capture", spec);  // the option's parser names a bad word
  const std::string words = check.capture;
  std::size_t at = 0;
  while (at < words.size()) {
    std::size_t comma = words.find(',', at);
    if (comma == std::string::npos) comma = words.size();
    std::string item = words.substr(at, comma - at);
    at = comma + 1;
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    const std::string word = item.substr(0, eq), arg = eq == std::string::npos ? "" : item.substr(eq + 1);
    words_.push_back(word);
    if (word == "slow") slow_ = arg.empty() ? slow_factor : std::stod(arg);
    if (word == "stall") stall_ = arg.empty() ? stall_factor : std::stod(arg);
    if (word == "file") file_ = arg;
    if (word == "phase") {
      const std::size_t gt = arg.find('>');
      phase_ = arg.substr(0, gt);
      share_ = std::stod(arg.substr(gt + 1));
    }
  }
  if (!file_.empty()) file_known_ = mtime(file_, file_seen_);
}

bool capture_rule::has(std::string_view trigger) const {
  return std::find(words_.begin(), words_.end(), trigger) != words_.end();
}

std::string capture_rule::weigh(double p50, double p95, std::string_view label, double phase_share, double step_max) {
  if (cool_ > 0) --cool_;
  std::string reason;
  fired_.clear();
  if ((slow_ > 0 || stall_ > 0) && p50 > 0 && p95 > 0) {
    if (base_.size() <= static_cast<std::size_t>(baseline_windows)) {  // the first window is warm-up: left out
      base_.emplace_back(p50, p95);
    } else {
      std::vector<double> b50, b95;
      for (std::size_t i = 1; i < base_.size(); ++i) {
        b50.push_back(base_[i].first);
        b95.push_back(base_[i].second);
      }
      const double base50 = median3(b50), base95 = median3(b95);
      // Both over F x, or the p50 alone far over (1.5 F x: a loaded host's p95 baseline, inflated
      // by preemption, kept three windows of p50 at 6x from counting).
      const bool p50_far = slow_ > 0 && p50 > 1.5 * slow_ * base50;
      const bool slow = slow_ > 0 && ((p95 > slow_ * base95 && p50 > slow_ * base50) || p50_far);
      // A slow stretch ends after cool_down windows in a row that are not slow: one quick window
      // inside it (a preempted machine's noise) starts no second capture.
      calm_ = slow ? 0 : calm_ + 1;
      if (slow && !in_slow_) {
        char factor[32];
        if (p95 > slow_ * base95) {
          std::snprintf(factor, sizeof factor, "%g", slow_);
          reason = "slow: step p95 " + format_ms(p95) + " ms, over " + factor + "x the baseline " + format_ms(base95) +
                   " ms (p50 " + format_ms(p50) + " ms against " + format_ms(base50) + ")";
        } else {
          std::snprintf(factor, sizeof factor, "%g", 1.5 * slow_);
          reason = "slow: step p50 " + format_ms(p50) + " ms, over " + factor + "x the baseline " + format_ms(base50) +
                   " ms (p95 " + format_ms(p95) + " ms against " + format_ms(base95) + ")";
        }
        fired_ = "slow";
      }
      in_slow_ = slow || (in_slow_ && calm_ < cool_down);
      // A stall: one step far past the baseline in a window whose p50 is not slow (a one-off).
      const bool p50_slow = p50 > std::max(slow_, slow_factor) * base50;
      if (reason.empty() && stall_ > 0 && !p50_slow && step_max > stall_ * base50 &&
          step_max - base50 >= stall_min_ms) {
        char factor[32];
        std::snprintf(factor, sizeof factor, "%.0f", step_max / base50);
        reason = "stall: a step of " + format_ms(step_max) + " ms, " + factor + "x the baseline p50 " +
                 format_ms(base50) + " ms";
        fired_ = "stall";
      }
    }
  }
  if (has("label") && !label.empty()) {  // a label settles when two windows in a row give it
    if (label == last_label_ && label != label_) {
      if (!label_.empty() && reason.empty())
        reason = "label: " + label_ + " -> " + std::string(label), fired_ = "label";
      label_ = std::string(label);
    }
    last_label_ = std::string(label);
  }
  if (!phase_.empty() && reason.empty() && !std::isnan(phase_share)) {  // once per crossing
    const bool over = phase_share > share_;
    if (over && !phase_over_) {
      reason = "phase: `" + phase_ + "` " + percent(phase_share) + " of the step, over " +
               std::to_string(static_cast<int>(std::lround(100 * share_))) + "%";
      fired_ = "phase";
    }
    phase_over_ = over;
  }
  if (!file_.empty() && reason.empty()) {
    double seen = 0;
    if (mtime(file_, seen)) {
      if (!file_known_ || seen > file_seen_) reason = "file " + file_ + " touched", fired_ = "file";
      file_seen_ = seen;
      file_known_ = true;
    }
  }
  if (cool_ > 0) fired_.clear();
  return cool_ == 0 ? reason : std::string();
}

std::string capture_block(const capture_record& c) {
  char cost[32];
  std::snprintf(cost, sizeof cost, "%.2f", c.cost_s);
  const std::string rank = c.rank != 0 ? " on rank " + std::to_string(c.rank) : "";
  std::string out =
      "── steptrace capture" + std::string(c.retroactive ? ", retroactive" : "") + " (" + c.reason + ")\n";
  if (c.retroactive) {  // steps kept from before the trigger: which, and the one that tripped it
    std::string which;
    for (std::size_t i = 0; i < c.indices.size() && i < 12; ++i)
      which += (i ? ", " : "") + std::to_string(c.indices[i]);
    if (c.indices.size() > 12) which += ", ...";
    out += "kept step" + std::string(c.indices.size() == 1 ? " " : "s ") + which + rank + " (step " +
           std::to_string(c.tripped) + " tripped it): " + (c.label.empty() ? "no steps read" : c.label) + "\n";
  } else {
    out += "captured steps " + std::to_string(c.first_step) + "-" + std::to_string(c.last_step) + rank + ": " +
           (c.label.empty() ? "no steps read" : c.label) + "\n";
  }
  if (!c.evidence.empty()) out += "  " + c.evidence + "\n";
  if (!c.advice.empty()) out += "  try first: " + c.advice + "\n";
  out += "  trace: " + c.path +
         (c.tool == "torch.profiler"
              ? " (torch.profiler's cost: " + std::string(cost) + " s for these steps, writing included)\n"
              : " (steptrace's own records of these steps, " +
                    std::string(c.retroactive ? "kept before the trigger" : "no profiler run") + "; written in " +
                    std::string(cost) + " s on its collector thread)\n");
  return out;
}

}  // namespace steptrace

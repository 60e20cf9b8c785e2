// Internal (not public API): what each label says. diagnosis.cpp chooses the label; its evidence
// and advice belong to its cause, one function per label in that cause's file, found through
// label_words_of. Each reads the run through one label_reading.
//
//   const label_reading r{s, t, c, idle, lock, device, lock_leads, compute_idle_largest, close, near_miss, gain};
//   label_words_of(d.label, r)(r, d);  // d.evidence and d.advice, said in the cause's own terms
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/gains.hpp"
#include "report/diagnosis/hypotheses.hpp"
#include "report/diagnosis/summary_facts.hpp"

namespace steptrace::detail {

// What the rules weighed, handed to the label's words.
struct label_reading {
  const summary& s;
  const diagnosis_thresholds& t;
  const cause_shares& c;  // each cause's weight: its gain (gains.hpp)
  const idle_groups& idle;
  const shared_lock& lock;
  bool device;                        // a device view decides (steps viewed)
  bool lock_leads;                    // the shared lock's hypothesis chose WAIT-HEAVY
  bool compute_idle_largest;          // the GPU idles mostly while the host is in `compute`
  std::string close;                  // " Close call: ..." on the share that decided, or empty
  std::string near_miss;              // no rule fired and one cause is just under its threshold, or empty
  std::optional<double>& first_gain;  // the first fix's gain, where checked hypotheses chose it
};

using label_words = void (*)(const label_reading& r, diagnosis& d);

// The words of a label: `host_compute` picks BALANCED's host side of `compute` (the GPU idles
// mostly there, yet not for launches) over "no single cause".
label_words label_words_of(std::string_view label, const label_reading& r);

void input_bound_words(const label_reading& r, diagnosis& d);    // input_advice.cpp
void h2d_bound_words(const label_reading& r, diagnosis& d);      // copy_advice.cpp
void wait_heavy_words(const label_reading& r, diagnosis& d);     // wait_hypotheses.cpp
void host_bound_words(const label_reading& r, diagnosis& d);     // host_bound.cpp
void comm_bound_words(const label_reading& r, diagnosis& d);     // comm_advice.cpp
void launch_bound_words(const label_reading& r, diagnosis& d);   // launch_advice.cpp
void compute_bound_words(const label_reading& r, diagnosis& d);  // compute_advice.cpp
void balanced_words(const label_reading& r, diagnosis& d);       // balanced.cpp
void host_compute_words(const label_reading& r, diagnosis& d);   // balanced.cpp

// Causes that hold a real share without deciding the label, said under it ("also: ..."), so a
// run whose label is right is not told all is well with a quarter of each step in `input`
// (secondary_findings.cpp). `input` and `other` are shares of step time (with a device view: the
// GPU's idle time then); each finding carries its gain.
std::vector<finding> secondary_findings(const summary& s, const diagnosis_thresholds& t, const cause_shares& c,
                                        const std::string& label);

// Evidence the labels share (label_words.cpp).
// "`input` takes 41.0% of step time (... ms of ... ms per step; the rule fires at 30%).";
// `threshold` < 0: the share is a fact beside the rule that fired (a device view's), not the rule.
std::string phase_evidence(const summary& s, std::string_view name, double threshold);
// " GPU idle 71% of the step; 93% of that while the host was in `input`."
std::string idle_evidence(const summary& s, std::string_view phase);
// " Close call: 31.2% is within 5 points of the rule's 30%." when a deciding share is that near.
std::string closeness(double share, double threshold, const diagnosis_thresholds& t);
// "The GPU sat idle 41.0% of step time while the host was in `input` (the rule fires at 15%).": a
// device cause's evidence.
std::string device_cause_words(const summary& s, std::string_view group, double share, double threshold);
// Said where no device measurement backs the host rules; replaced by why, where there is a reason.
inline constexpr std::string_view host_view_only = " Host view only: no device measurements back this up.";

}  // namespace steptrace::detail

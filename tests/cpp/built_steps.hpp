// The step builder's tests share these: a built step copied whole, and records made by hand.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "analysis/step_builder.hpp"
#include "steptrace/phase.hpp"

namespace steptrace::testing {

using detail::built_step;
using detail::host_segment;
using detail::record;
using detail::record_kind;

struct step_copy {
  std::uint64_t begin, end, set_aside;
  bool failed, warmup;
  std::vector<host_segment> segments;
  std::map<std::uint32_t, std::uint64_t> ticks;
  std::map<std::uint32_t, std::uint32_t> calls;
  std::map<std::uint32_t, std::uint64_t> incl;
  std::map<std::uint32_t, std::uint32_t> parent;
};

inline step_copy copy_of(const built_step& s) {
  step_copy c{s.begin, s.end, s.set_aside, s.failed, s.warmup, s.segments, {}, {}, {}, {}};
  for (const auto& p : s.phases) {
    c.ticks[p.id] = p.ticks;
    c.calls[p.id] = p.calls;
    c.incl[p.id] = p.incl_ticks;
    c.parent[p.id] = p.parent;
  }
  return c;
}

inline record step_begin(std::uint64_t t) { return {t, 0, record_kind::step_begin}; }
inline record step_end(std::uint64_t t) { return {t, 0, record_kind::step_end}; }
inline record begin(phase_id p, std::uint64_t t) { return {t, p.value, record_kind::phase_begin}; }
inline record end(phase_id p, std::uint64_t t) { return {t, p.value, record_kind::phase_end}; }
inline record exclude(phase_id p, std::uint64_t t) { return {t, p.value, record_kind::exclude_begin}; }
inline record resume(phase_id p, std::uint64_t t) { return {t, p.value, record_kind::exclude_end}; }

}  // namespace steptrace::testing

// Internal: the job's view of a hang from the ranks' live rows (hang_wavefront.cpp): where the
// wavefront of collectives stopped, who never reached it and where each of those is. See
// cpp/src/report/README.md, "Hangs".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "steptrace/hang.hpp"

namespace steptrace::detail {

// A row's open step and last collectives (its " h" and " c" sections).
struct row_hang {
  std::uint32_t rank = 0;
  std::uint64_t steps = 0;  // counted in the row's window: it moved
  bool open = false;        // it has an " h" section
  std::uint64_t pid = 0;
  std::string host;
  std::uint64_t step = 0;
  double open_s = 0;
  bool suspected = false;
  std::string phase;
  std::vector<collective_mark> marks;
};

// live: the current rows; gone: the ranks with none, their last row (open false if none) and
// whether their process is known to have exited.
job_hang wavefront(const std::vector<row_hang>& live, const std::vector<std::pair<row_hang, bool>>& gone);

}  // namespace steptrace::detail

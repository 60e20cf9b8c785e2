// A straggler's node against the median rank's (report/diagnosis/straggler.hpp, node_departures):
// the readings that say why a rank is slow when its code is not (cpp/src/report/README.md, "Node
// health").
#include <fmt/format.h>

#include <string>
#include <vector>

#include "report/diagnosis/straggler.hpp"

namespace steptrace::detail {
namespace {

// NVML's clock-event reasons that slow a GPU (nvmlClocksEventReason*), and their words.
struct reason {
  std::uint64_t bit;
  const char* words;
};
constexpr reason slowdowns[] = {
    {0x4, "power cap"},    {0x8, "hardware slowdown"}, {0x20, "thermal slowdown"}, {0x40, "hardware thermal slowdown"},
    {0x80, "power brake"},
};

// The median of one reading over `others`, those that read it; negative when none did.
double median_of(const std::vector<node_health>& others, double node_health::*field) {
  std::vector<double> v;
  for (const node_health& n : others) {
    if (n.*field >= 0) v.push_back(n.*field);
  }
  return v.empty() ? -1 : median(v);
}

}  // namespace

std::string node_departures(const node_health& own, const std::vector<node_health>& others) {
  if (others.empty()) return {};
  std::vector<std::string> said;
  auto below = [&](double node_health::*field, double share, const char* what, const char* unit) {
    const double mine = own.*field, mid = median_of(others, field);
    if (mine >= 0 && mid > 0 && mine < share * mid)
      said.push_back(fmt::format("{} {:.0f} {} against {:.0f} median", what, mine, unit, mid));
  };
  auto above = [&](double node_health::*field, double by, const char* what, const char* unit, int digits) {
    const double mine = own.*field, mid = median_of(others, field);
    if (mine >= 0 && mid >= 0 && mine >= mid + by) {
      said.push_back(fmt::format("{} {:.{}f}{} against {:.{}f} median", what, mine, digits, unit, mid, digits));
    }
  };
  below(&node_health::sm_clock_mhz, 0.9, "SM clock", "MHz");
  below(&node_health::mem_clock_mhz, 0.9, "memory clock", "MHz");
  above(&node_health::temperature_c, 10, "temperature", " C", 0);
  std::uint64_t others_throttle = ~0ull;  // a reason every other rank has too is the job's, not this node's
  for (const node_health& n : others) others_throttle &= n.throttle;
  for (const reason& r : slowdowns) {
    if ((own.throttle & r.bit) && !(others_throttle & r.bit)) said.push_back(r.words);
  }
  above(&node_health::ecc_errors, 1, "uncorrected ECC errors", "", 0);
  above(&node_health::xid_errors, 1, "XID errors", "", 0);
  const std::size_t before_cpu = said.size();  // the readings after it say the rank waits for a core
  if (own.steal_share >= 0) {
    const double mid = median_of(others, &node_health::steal_share);
    if (mid >= 0 && own.steal_share >= mid + 0.05) {
      said.push_back(fmt::format("CPU stolen {:.0f}% against {:.0f}% median", 100 * own.steal_share, 100 * mid));
    }
  }
  if (own.others_cpu_share >= 0) {
    const double mid = median_of(others, &node_health::others_cpu_share);
    if (mid >= 0 && own.others_cpu_share >= mid + 0.25) {
      said.push_back(fmt::format("its main thread waited for a core {:.0f}% of the time against {:.0f}% median",
                                 100 * own.others_cpu_share, 100 * mid));
    }
  }
  const double switches = median_of(others, &node_health::involuntary_per_s);
  if (own.involuntary_per_s >= 0 && switches >= 0 && own.involuntary_per_s >= 2 * switches + 100) {
    said.push_back(fmt::format("{:.0f} involuntary context switches a second against {:.0f} median",
                               own.involuntary_per_s, switches));
  }
  const bool waits_for_core = said.size() > before_cpu;
  std::string out;
  for (const std::string& s : said) out += (out.empty() ? "" : ", ") + s;
  if (waits_for_core) out += ": it waits for a core, other processes share its CPU";
  return out;
}

}  // namespace steptrace::detail

// A rank's node, once a live window (core/live/node_reading.hpp).
#include "core/live/node_reading.hpp"

#include "base/log.hpp"

namespace steptrace::detail {

node_health node_reader::read(std::int64_t device, bool gpu) {
  std::lock_guard<std::mutex> lock(mutex_);
  node_health out;
  if (gpu) {
    gpu_health g;
    if (nvml_.read(device < 0 ? 0 : device, g)) {
      out.gpu = true;
      out.sm_clock_mhz = g.sm_clock_mhz;
      out.mem_clock_mhz = g.mem_clock_mhz;
      out.power_w = g.power_w;
      out.temperature_c = g.temperature_c;
      constexpr std::uint64_t slowdowns = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;  // power cap, slowdown, thermal, brake
      out.throttle = g.clock_event_reasons & slowdowns;
      out.ecc_errors = g.ecc_uncorrected;
      out.xid_errors = g.xid_errors;
    } else if (!said_) {
      said_ = true;
      log(log_level::warn, nvml_.why_not() + ": the ranks' rows carry no GPU clocks, power or temperature (said once)");
    }
  }
  const host_reading h = host_.read();
  out.steal_share = h.steal_share;
  out.involuntary_per_s = h.involuntary_per_s;
  out.others_cpu_share = h.main_wait_share;
  return out;
}

}  // namespace steptrace::detail

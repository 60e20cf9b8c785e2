#include "profiler/device_clock.hpp"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "profiler/trace_names.hpp"

namespace steptrace::detail {

namespace {

constexpr std::uint64_t blocked_ns = 50'000;

// A sync that waits for every stream of the device.
bool waits_for_device(std::string_view n) {
  return n.find("DeviceSynchronize") != std::string_view::npos || n.find("CtxSynchronize") != std::string_view::npos;
}

struct device_work {
  std::uint64_t correlation, start, end;
  std::uint32_t stream;
  bool operator<(const device_work& o) const { return correlation < o.correlation; }
};

// A launch call's work: when the call began, when its records ended, their stream (one: the
// first record's; several streams for one launch, a graph's, count as many).
struct launched_work {
  std::uint64_t at, end;
  std::uint32_t stream;
  bool one_stream;
};

}  // namespace

device_clock_reading read_device_clock(const trace_events& t) {
  std::size_t records = 0, calls = 0;  // sized once: no copy while they grow
  for (const trace_event& e : t.events) {
    records += is_device_work(e.cat) && e.correlation != 0 ? 1 : 0;
    calls += e.cat == event_cat::runtime && e.correlation != 0 ? 1 : 0;
  }
  std::vector<device_work> work;
  work.reserve(records);
  for (const trace_event& e : t.events) {
    if (is_device_work(e.cat) && e.correlation != 0) {
      work.push_back({e.correlation, e.ts, e.ts + e.dur, t.args_of(e).stream});
    }
  }
  if (work.empty()) return {};
  std::sort(work.begin(), work.end());
  std::vector<launched_work> launched;
  launched.reserve(calls);
  std::int64_t min_lag = INT64_MAX;  // the soonest any record started after its launch began
  for (const trace_event& e : t.events) {
    if (e.cat != event_cat::runtime || e.correlation == 0 || !is_device_work_call(t.names[e.name])) continue;
    auto it = std::lower_bound(work.begin(), work.end(), device_work{e.correlation, 0, 0, 0});
    if (it == work.end() || it->correlation != e.correlation) continue;
    launched_work w{e.ts, 0, it->stream, true};
    for (; it != work.end() && it->correlation == e.correlation; ++it) {
      w.end = std::max(w.end, it->end);
      w.one_stream = w.one_stream && it->stream == w.stream;
      min_lag = std::min(min_lag, static_cast<std::int64_t>(it->start) - static_cast<std::int64_t>(e.ts));
    }
    launched.push_back(w);
  }
  if (launched.empty()) return {};
  std::sort(launched.begin(), launched.end(),
            [](const launched_work& a, const launched_work& b) { return a.at < b.at; });
  // By launch order: the latest end so far, and whether all of it ran on one stream.
  std::vector<std::uint64_t> end_by(launched.size());
  std::vector<char> one_stream_by(launched.size());
  std::uint64_t end = 0;
  bool one = true;
  for (std::size_t i = 0; i < launched.size(); ++i) {
    end = std::max(end, launched[i].end);
    one = one && launched[i].one_stream && launched[i].stream == launched.front().stream;
    end_by[i] = end;
    one_stream_by[i] = one ? 1 : 0;
  }
  std::vector<std::int64_t> offsets;  // each sync's: its work's end less its return
  for (const trace_event& e : t.events) {
    if (e.cat != event_cat::runtime || e.dur < blocked_ns) continue;
    const std::string_view n = t.names[e.name];
    if (!is_sync(n)) continue;
    const auto k = std::lower_bound(launched.begin(), launched.end(), e.ts,
                                    [](const launched_work& w, std::uint64_t at) { return w.at < at; }) -
                   launched.begin();
    if (k == 0) continue;
    const std::size_t i = static_cast<std::size_t>(k) - 1;
    if (!waits_for_device(n) && !(n.find("StreamSynchronize") != std::string_view::npos && one_stream_by[i])) continue;
    offsets.push_back(static_cast<std::int64_t>(end_by[i]) - static_cast<std::int64_t>(e.ts + e.dur));
  }
  if (offsets.empty()) return {};
  std::vector<std::int64_t> sorted = offsets;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
  const std::int64_t median = sorted[sorted.size() / 2];
  const std::int64_t tolerance = std::max<std::int64_t>(200'000, std::llabs(median) / 20);
  const auto agree = std::count_if(offsets.begin(), offsets.end(),
                                   [&](std::int64_t x) { return std::llabs(x - median) <= tolerance; });
  if (3 * static_cast<std::size_t>(agree) < 2 * offsets.size()) return {};
  device_clock_reading r;
  r.syncs = static_cast<std::uint32_t>(offsets.size());
  if (std::llabs(median) < clock_offset_min_ns) return r;  // the clocks agree
  // The launches' word: with the device ahead, none of its work starts sooner than the offset
  // after its launch; behind, work starts before its launch, by no more than the offset.
  const bool launches_agree = median > 0 ? min_lag >= median - tolerance : min_lag < 0 && min_lag >= median - tolerance;
  if (!launches_agree) return {};
  r.offset_ns = median;
  return r;
}

bool remove_device_clock_offset(trace_events& t, std::int64_t offset_ns) {
  if (offset_ns > 0) {
    for (const trace_event& e : t.events) {
      if (is_device_work(e.cat) && e.ts < static_cast<std::uint64_t>(offset_ns)) return false;
    }
  }
  for (trace_event& e : t.events) {
    if (is_device_work(e.cat)) e.ts = static_cast<std::uint64_t>(static_cast<std::int64_t>(e.ts) - offset_ns);
  }
  return true;
}

}  // namespace steptrace::detail

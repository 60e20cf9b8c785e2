// Kernels joined to their launch calls across CUPTI's buffers. See launch_match.hpp.
#include "gpu/launch_match.hpp"

namespace steptrace::detail {

void launch_matcher::take(const std::vector<device_record>& records, std::uint64_t now_ns,
                          std::vector<device_record>& ready) {
  for (const device_record& r : records) {  // launches first: a call may follow its kernel in a buffer
    if (r.kind == device_activity::launch) {
      launches_[r.correlation % launches_.size()] = {r.correlation, r.graph, r.start};
      ++launches_seen_;
    }
  }
  for (const device_record& r : records) {
    if (r.kind == device_activity::launch) continue;
    if (r.kind != device_activity::kernel || r.correlation == 0) {
      ready.push_back(r);
      continue;
    }
    device_record k = r;
    find(k);
    if (k.launched != 0) {
      ready.push_back(k);
    } else if (launches_absent()) {
      ++unmatched_;
      ready.push_back(k);
    } else {
      waiting_.push_back({k, now_ns});
    }
  }
  sweep(now_ns, false, ready);
}

void launch_matcher::release(std::uint64_t now_ns, bool all, std::vector<device_record>& ready) {
  sweep(now_ns, all, ready);
}

void launch_matcher::sweep(std::uint64_t now_ns, bool all, std::vector<device_record>& ready) {
  const std::size_t over = waiting_.size() > max_waiting ? waiting_.size() - max_waiting : 0;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < waiting_.size(); ++i) {
    waiting_kernel& w = waiting_[i];
    find(w.record);
    if (w.record.launched != 0 || all || i < over || now_ns - w.since >= hold_ns) {
      unmatched_ += w.record.launched == 0 ? 1 : 0;
      ready.push_back(w.record);
    } else {
      waiting_[kept++] = w;
    }
  }
  waiting_.resize(kept);
}

}  // namespace steptrace::detail

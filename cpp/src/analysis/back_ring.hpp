// Internal (not public API): the retroactive capture's ring (the `capture_back` option). Per
// thread, the last K steps and the K slowest counted steps of each of the last windows, each kept
// whole (phase calls and figures, set-aside spans, device records), so that when a trigger fires
// the steps that tripped it can still be written (cpp/src/core/README.md, "Capture on trouble").
// Fed by the collector, never by a recording thread; bounded in steps and in bytes.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "analysis/flight_recorder.hpp"

namespace steptrace::detail {

class back_ring {
 public:
  static constexpr std::size_t windows = 8;  // the window filling now and the 7 closed before it
  // Past this, the oldest closed windows' steps are let go at the next window's close.
  static constexpr std::uint64_t max_bytes = 64ull << 20;

  enum class choice { recent, window, slowest, numbered };

  void configure(std::uint32_t steps);  // 0: keeps nothing
  std::uint32_t steps() const noexcept { return steps_; }
  void on_step(const built_step& s);
  void on_set_aside(std::uint32_t thread, std::uint32_t id, std::uint64_t begin, std::uint64_t end);
  void attach_device(const device_join& join, std::uint64_t settled_ns, std::uint64_t (*to_ns)(std::uint64_t));
  void next_window();  // a live window closed
  std::uint64_t bytes() const noexcept;
  std::size_t kept() const;  // steps held now, each window's counted apart

  // The steps a retroactive capture writes, copied into `into` (configured here): `recent`, the
  // last `steps` steps to end, any thread; `window`, the `steps` slowest counted steps of the window
  // that closed last and the one filling since; `slowest`, of every kept window; `numbered`, the
  // kept steps whose index is in `indices`. Their indices, oldest first;
  // `lead`: the step that names the capture (the slowest; for `recent`, the last).
  std::vector<std::uint64_t> choose(choice which, const std::vector<std::uint64_t>& indices, flight_recorder& into,
                                    std::uint64_t& lead) const;

 private:
  std::uint32_t steps_ = 0;
  flight_recorder recent_;
  std::array<flight_recorder, windows> slowest_;
  std::size_t now_ = 0;  // slowest_[now_]: the window filling
};

}  // namespace steptrace::detail

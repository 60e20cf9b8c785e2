// Internal (not public API): the other threads' innermost phases as one tiling of the time any
// of them covers (where two overlap, the one that started first keeps its time), made in time
// order as the main thread's gaps ask for it and never held whole (profiler/trace_rules.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "profiler/host_forest.hpp"

namespace steptrace::detail {

struct fill_piece {
  std::uint64_t begin, end;
  std::uint32_t phase;  // the forest's kind of the innermost node open
};

class host_fill {
 public:
  // `threads`: forests with their kinds set, alive while the fill is read.
  explicit host_fill(const std::vector<forest>& threads);

  // piece(a, b, phase) for each stretch of [x, y) the tiling covers, in time order. Calls that
  // go forward in time (each x at or after the y before it: the main thread's gaps, step after
  // step) cost one pass in all; one that goes back starts the pass again.
  template <class Piece>
  void within(std::uint64_t x, std::uint64_t y, Piece&& piece) {
    if (x < last_y_) start();
    last_y_ = y;
    for (;;) {
      if (!held_ && !(held_ = next_tile(tile_))) return;
      if (tile_.end <= x) {
        held_ = false;
        continue;
      }
      if (tile_.begin >= y) return;
      piece(tile_.begin > x ? tile_.begin : x, tile_.end < y ? tile_.end : y, tile_.phase);
      if (tile_.end > y) return;  // kept for the next gap
      held_ = false;
    }
  }

 private:
  // One forest's pieces in time order: a depth-first walk made one step at a time.
  class thread_pieces {
   public:
    explicit thread_pieces(const forest& f) : f_(&f) {}
    bool next(fill_piece& out);

   private:
    struct frame {
      std::uint32_t node, child;
    };
    const forest* f_;
    std::size_t root_ = 0;
    std::uint64_t cursor_ = 0;
    std::vector<frame> open_;
  };
  struct head {
    fill_piece piece;
    std::uint32_t thread;
  };

  void start();                      // the pass from the first piece
  bool next_piece(fill_piece& out);  // the threads' pieces merged by (begin, end, phase)
  bool next_tile(fill_piece& out);   // the merge with what an earlier piece covers cut away

  const std::vector<forest>* forests_;
  std::vector<thread_pieces> threads_;
  std::vector<head> heads_;  // a heap, the earliest piece on top
  std::uint64_t covered_ = 0;
  fill_piece tile_{};
  bool held_ = false;
  std::uint64_t last_y_ = 0;
};

}  // namespace steptrace::detail

#include "profiler/host_fill.hpp"

#include <algorithm>

namespace steptrace::detail {
namespace {

// The heap's order: the later piece is "less", so that the earliest is on top.
struct later {
  template <class Head>
  bool operator()(const Head& x, const Head& y) const {
    const fill_piece &a = x.piece, &b = y.piece;
    return a.begin != b.begin ? a.begin > b.begin : a.end != b.end ? a.end > b.end : a.phase > b.phase;
  }
};

}  // namespace

// The walk of forest::walk, each node entered and left in turn: entering a child ends the piece
// of its parent's kind, leaving a node ends the piece of its own; empty pieces are none.
bool host_fill::thread_pieces::next(fill_piece& out) {
  const forest& f = *f_;
  for (;;) {
    if (open_.empty()) {
      if (root_ == f.roots.size()) return false;
      const std::uint32_t r = f.roots[root_++];
      cursor_ = f.begin(r);
      open_.push_back({r, f.first_child[r]});
      continue;
    }
    const std::uint32_t node = open_.back().node, child = open_.back().child;
    const std::uint64_t from = cursor_;
    if (child == forest::npos) {
      cursor_ = f.end[node];
      open_.pop_back();
    } else {
      open_.back().child = f.next_sibling[child];
      cursor_ = f.begin(child);
      open_.push_back({child, f.first_child[child]});
    }
    if (cursor_ > from) {
      out = {from, cursor_, f.kind[node]};
      return true;
    }
  }
}

host_fill::host_fill(const std::vector<forest>& threads) : forests_(&threads) { start(); }

void host_fill::start() {
  threads_.clear();
  heads_.clear();
  threads_.reserve(forests_->size());
  for (const forest& f : *forests_) {
    threads_.emplace_back(f);
    head h{{}, static_cast<std::uint32_t>(threads_.size() - 1)};
    if (threads_.back().next(h.piece)) heads_.push_back(h);
  }
  std::make_heap(heads_.begin(), heads_.end(), later{});
  covered_ = 0;
  held_ = false;
}

bool host_fill::next_piece(fill_piece& out) {
  if (heads_.empty()) return false;
  std::pop_heap(heads_.begin(), heads_.end(), later{});
  head& h = heads_.back();
  out = h.piece;
  if (threads_[h.thread].next(h.piece)) {
    std::push_heap(heads_.begin(), heads_.end(), later{});
  } else {
    heads_.pop_back();
  }
  return true;
}

bool host_fill::next_tile(fill_piece& out) {
  fill_piece p;
  while (next_piece(p)) {
    if (p.end <= covered_) continue;
    out = {std::max(p.begin, covered_), p.end, p.phase};
    covered_ = p.end;
    return true;
  }
  return false;
}

}  // namespace steptrace::detail

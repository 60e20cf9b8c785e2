// Internal (not public API): one thread's host nodes of a trace as a forest, the shape the
// phase rules walk (profiler/trace_rules.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "profiler/trace_events.hpp"

namespace steptrace::detail {

// One thread's host nodes as a forest: a node is the child of the innermost node open at its
// start, clipped to end inside it (rounded timestamps can overhang by a nanosecond).
struct forest {
  static constexpr std::uint32_t npos = 0xffffffffu;
  std::vector<const trace_event*> node;
  std::vector<std::uint64_t> begin, end;
  std::vector<std::uint32_t> parent, first_child, next_sibling, roots;
  std::vector<std::uint32_t> own;   // the node's own phase, or none
  std::vector<std::uint32_t> kind;  // its built-in phase: own, else inherited, else compute

  explicit forest(std::vector<const trace_event*> nodes) : node(std::move(nodes)) {
    std::stable_sort(node.begin(), node.end(), [](const trace_event* a, const trace_event* b) {
      return a->ts != b->ts ? a->ts < b->ts : a->dur > b->dur;
    });
    const std::size_t n = node.size();
    begin.resize(n);
    end.resize(n);
    parent.assign(n, npos);
    first_child.assign(n, npos);
    next_sibling.assign(n, npos);
    std::vector<std::uint32_t> last_child(n, npos), open;
    for (std::uint32_t i = 0; i < n; ++i) {
      begin[i] = node[i]->ts;
      end[i] = node[i]->ts + node[i]->dur;
      while (!open.empty() && end[open.back()] <= begin[i]) open.pop_back();
      if (open.empty()) {
        roots.push_back(i);
      } else {
        const std::uint32_t p = open.back();
        end[i] = std::min(end[i], end[p]);
        parent[i] = p;
        (last_child[p] == npos ? first_child[p] : next_sibling[last_child[p]]) = i;
        last_child[p] = i;
      }
      open.push_back(i);
    }
  }

  // Depth-first: enter(i) (false: skip its subtree), its children in time order, leave(i).
  template <class Enter, class Leave>
  void walk(std::uint32_t root, Enter&& enter, Leave&& leave) const {
    struct frame {
      std::uint32_t node, child;
    };
    if (!enter(root)) return;
    std::vector<frame> stack{{root, first_child[root]}};
    while (!stack.empty()) {
      const std::uint32_t c = stack.back().child;
      if (c == npos) {
        leave(stack.back().node);
        stack.pop_back();
        continue;
      }
      stack.back().child = next_sibling[c];
      if (enter(c)) stack.push_back({c, first_child[c]});
    }
  }
};

}  // namespace steptrace::detail

// Internal (not public API): one thread's host nodes of a trace as a forest, the shape the
// phase rules walk (profiler/trace_rules.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "profiler/trace_events.hpp"

namespace steptrace::detail {

// One thread's host nodes as a forest: a node is the child of the innermost node open at its
// start, clipped to end inside it (rounded timestamps can overhang by a nanosecond). Nodes are
// events' indices, 32 bytes a node in all: a trace's forests sit beside its events.
struct forest {
  static constexpr std::uint32_t npos = 0xffffffffu;
  std::vector<std::uint32_t> node;  // in trace_events::events, in time order (parents first)
  std::vector<std::uint64_t> end;   // clipped to the parent's end
  std::vector<std::uint32_t> parent, first_child, next_sibling, roots;
  std::vector<std::uint32_t> own;   // the node's own phase, or none
  std::vector<std::uint32_t> kind;  // its built-in phase: own, else inherited, else compute

  forest(const std::vector<trace_event>& events, std::vector<std::uint32_t> nodes)
      : node(std::move(nodes)), events_(&events) {
    std::stable_sort(node.begin(), node.end(), [&events](std::uint32_t a, std::uint32_t b) {
      const trace_event &x = events[a], &y = events[b];
      return x.ts != y.ts ? x.ts < y.ts : x.dur > y.dur;
    });
    const std::size_t n = node.size();
    end.resize(n);
    parent.assign(n, npos);
    first_child.assign(n, npos);
    next_sibling.assign(n, npos);
    std::vector<std::uint32_t> last_child(n, npos), open;
    for (std::uint32_t i = 0; i < n; ++i) {
      end[i] = event(i).ts + event(i).dur;
      while (!open.empty() && end[open.back()] <= begin(i)) open.pop_back();
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

  std::size_t size() const { return node.size(); }
  const trace_event& event(std::uint32_t i) const { return (*events_)[node[i]]; }
  std::uint64_t begin(std::uint32_t i) const { return event(i).ts; }

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

 private:
  const std::vector<trace_event>* events_;
};

// The indices of the events `pick` takes, by thread, in file order: each thread's vector sized
// once (counted first), so a trace's forests are built without regrowing their inputs.
template <class Pick>
std::map<std::uint32_t, std::vector<std::uint32_t>> nodes_by_thread(const std::vector<trace_event>& events,
                                                                    Pick&& pick) {
  std::map<std::uint32_t, std::uint32_t> counts;
  for (const trace_event& e : events) {
    if (pick(e)) ++counts[e.tid];
  }
  std::map<std::uint32_t, std::vector<std::uint32_t>> out;
  for (const auto& [tid, n] : counts) out[tid].reserve(n);
  for (std::uint32_t i = 0; i < events.size(); ++i) {
    if (pick(events[i])) out[events[i].tid].push_back(i);
  }
  return out;
}

}  // namespace steptrace::detail

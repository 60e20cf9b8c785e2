// Process-wide marks of the collectives in flight (steptrace/hang.hpp): each group's calls
// numbered in the order this process made them, and the last one's kind, entry and exit. A hang
// report and each live row read them; the wrappers of torch.distributed's collectives write them.
// See cpp/src/report/README.md, "Hangs".
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <new>

#include "steptrace/hang.hpp"

namespace steptrace {
namespace {

constexpr std::size_t max_groups = 16;
constexpr std::size_t name_bytes = 64;

std::uint64_t now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

struct group_marks {
  char group[name_bytes] = {}, kind[name_bytes] = {};
  std::uint64_t calls = 0;                    // entered so far: the last one's number is calls - 1
  std::uint64_t entered_ns = 0, left_ns = 0;  // the last call's; left 0: not left
};

struct marks {
  std::mutex mutex;  // held for a copy of a few bytes; never around a call
  std::array<group_marks, max_groups> groups;
  std::size_t used = 0;
};

marks& table();

marks* make_table() {
  auto* m = new marks;  // never destroyed: a collective may end during exit
  // A fork copies the lock as some thread held it: the child gets a fresh one.
  pthread_atfork(nullptr, nullptr, [] { new (&table().mutex) std::mutex; });
  return m;
}

marks& table() {
  static marks* m = make_table();
  return *m;
}

void copy_name(char (&to)[name_bytes], std::string_view from) noexcept {
  const std::size_t n = std::min(from.size(), name_bytes - 1);
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

group_marks* find(marks& m, std::string_view group, bool make) noexcept {
  const std::string_view cut = group.substr(0, name_bytes - 1);
  for (std::size_t i = 0; i < m.used; ++i) {
    if (cut == m.groups[i].group) return &m.groups[i];
  }
  if (!make || m.used == max_groups) return nullptr;
  group_marks& g = m.groups[m.used++];
  copy_name(g.group, cut);
  return &g;
}

}  // namespace

std::uint64_t collective_entered(std::string_view group, std::string_view kind) noexcept {
  marks& m = table();
  const std::uint64_t at = now_ns();
  std::lock_guard<std::mutex> lock(m.mutex);
  group_marks* g = find(m, group, true);
  if (g == nullptr) return UINT64_MAX;  // past the bound: not marked
  copy_name(g->kind, kind);
  g->entered_ns = at;
  g->left_ns = 0;
  return g->calls++;
}

void collective_left(std::string_view group, std::uint64_t seq) noexcept {
  marks& m = table();
  const std::uint64_t at = now_ns();
  std::lock_guard<std::mutex> lock(m.mutex);
  group_marks* g = find(m, group, false);
  if (g != nullptr && seq + 1 == g->calls) g->left_ns = std::max<std::uint64_t>(at, 1);  // the last call only
}

std::vector<collective_mark> last_collectives() {
  marks& m = table();
  const std::uint64_t at = now_ns();
  std::vector<collective_mark> out;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    for (std::size_t i = 0; i < m.used; ++i) {
      const group_marks& g = m.groups[i];
      if (g.calls == 0) continue;
      out.push_back({g.group, g.kind, g.calls - 1, (at - std::min(at, g.entered_ns)) / 1e9,
                     g.left_ns == 0 ? -1.0 : (at - std::min(at, g.left_ns)) / 1e9});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const collective_mark& a, const collective_mark& b) { return a.entered_s < b.entered_s; });
  return out;
}

}  // namespace steptrace

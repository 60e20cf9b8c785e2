// Phase-name registry: process-wide, append-only, so an id never changes meaning.
//
// Servers name phases from data (models, routes): past `max_names` distinct names a new name
// never raises; it shares one overflow phase, and how many did is counted and reported.
// Labels are the names escaped (base/utf8.hpp), so different names never share a label.
#include "record/names.hpp"

#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "base/utf8.hpp"
#include "steptrace/phase.hpp"

namespace steptrace {
namespace {

constexpr std::uint32_t max_names = 4096;
constexpr std::size_t max_folded_remembered = 65536;  // names past the bound still told apart (memory)
constexpr const char* overflow_label = "(other names)";

struct registry {
  std::mutex mutex;
  std::deque<std::string> labels{"other", "input", "h2d", "compute", "wait"};  // by id, printable
  std::unordered_map<std::string, std::uint32_t> ids{                          // by the bytes the caller gave
                                                     {"other", 0},
                                                     {"input", 1},
                                                     {"h2d", 2},
                                                     {"compute", 3},
                                                     {"wait", 4}};
  std::uint32_t overflow = 0;  // the overflow phase's id, once made
  std::uint64_t folded = 0;    // distinct names sent there (each counted once while remembered)
};

registry& names() {
  static registry* r = new registry;  // never destroyed: phases may end during exit
  return *r;
}

}  // namespace

phase_id register_phase(std::string_view name) {
  if (name.empty()) throw std::invalid_argument("steptrace: a phase name cannot be empty");
  if (name == "other") {
    throw std::invalid_argument(
        "steptrace: 'other' is reserved for step time outside every phase; pick another phase name");
  }
  registry& r = names();
  std::lock_guard<std::mutex> lock(r.mutex);
  const std::string key(name);
  if (auto it = r.ids.find(key); it != r.ids.end()) return phase_id{it->second};
  if (r.labels.size() >= max_names) {
    if (r.overflow == 0) {
      r.overflow = static_cast<std::uint32_t>(r.labels.size());
      r.labels.push_back(overflow_label);
    }
    ++r.folded;
    if (r.ids.size() < max_names + max_folded_remembered) r.ids.emplace(key, r.overflow);  // counted once
    return phase_id{r.overflow};
  }
  const auto id = static_cast<std::uint32_t>(r.labels.size());
  r.labels.push_back(detail::escaped_utf8(key));
  r.ids.emplace(key, id);
  return phase_id{id};
}

std::uint64_t detail::folded_phase_names() noexcept {
  registry& r = names();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.folded;
}

std::string phase_label(phase_id id) {
  registry& r = names();
  std::lock_guard<std::mutex> lock(r.mutex);
  return id.value < r.labels.size() ? r.labels[id.value] : "phase#" + std::to_string(id.value);
}

}  // namespace steptrace

// Phase-name registry: process-wide, append-only, so an id never changes meaning.
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

struct registry {
  std::mutex mutex;
  std::deque<std::string> labels{"other", "input", "h2d", "compute", "wait"};  // by id, printable
  std::unordered_map<std::string, std::uint32_t> ids{  // by the bytes the caller gave
      {"other", 0}, {"input", 1}, {"h2d", 2}, {"compute", 3}, {"wait", 4}};
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
    throw std::invalid_argument("steptrace: too many distinct phase names (limit " +
                                std::to_string(max_names) + "); is a name built from data?");
  }
  const auto id = static_cast<std::uint32_t>(r.labels.size());
  r.labels.push_back(detail::printable_utf8(key));
  r.ids.emplace(key, id);
  return phase_id{id};
}

std::string phase_label(phase_id id) {
  registry& r = names();
  std::lock_guard<std::mutex> lock(r.mutex);
  return id.value < r.labels.size() ? r.labels[id.value] : "phase#" + std::to_string(id.value);
}

}  // namespace steptrace

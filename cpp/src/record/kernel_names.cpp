// The process's interned kernel names. See kernel_names.hpp.
#include "record/kernel_names.hpp"

#include <deque>
#include <mutex>
#include <unordered_map>

#include "record/collective_kernels.hpp"

namespace steptrace::detail {
namespace {

struct name_table {
  std::mutex mutex;
  std::unordered_map<const char*, std::uint32_t> by_pointer;  // CUPTI's pointer for a kernel
  std::unordered_map<std::string, std::uint32_t> by_text;
  std::deque<std::string> names{"", "(other kernels)"};  // by id: 0 unnamed, 1 past the bound
  std::deque<bool> collective{false, false};             // by id: is_collective_kernel of its name
};
constexpr std::uint32_t folded_id = 1;

name_table& table() {
  static auto* t = new name_table;  // never destroyed: CUPTI may hand a buffer over during exit
  return *t;
}

}  // namespace

std::uint32_t intern_kernel_name(const char* name, bool& collective) {
  collective = false;
  if (name == nullptr || *name == '\0') return unnamed_kernel;
  name_table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  // A pointer seen before, still naming the same text (a module unloaded may free it for another).
  if (auto it = t.by_pointer.find(name);
      it != t.by_pointer.end() && (it->second == folded_id || t.names[it->second] == name)) {
    collective = it->second == folded_id ? is_collective_kernel(name) : t.collective[it->second];
    return it->second;
  }
  std::uint32_t id = folded_id;
  if (auto it = t.by_text.find(name); it != t.by_text.end()) {
    id = it->second;
  } else if (t.by_text.size() < max_kernel_names) {
    id = static_cast<std::uint32_t>(t.names.size());
    t.names.emplace_back(name);
    t.collective.push_back(is_collective_kernel(name));
    t.by_text.emplace(t.names.back(), id);
  }
  collective = id == folded_id ? is_collective_kernel(name) : t.collective[id];
  // The pointer cache is bounded too: a tool that hands a fresh pointer per record still costs
  // one lookup by text, never unbounded memory.
  if (t.by_pointer.size() < 4 * max_kernel_names) t.by_pointer[name] = id;
  return id;
}

std::string kernel_name(std::uint32_t id) {
  name_table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  return id != unnamed_kernel && id < t.names.size() ? t.names[id] : std::string();
}

std::size_t kernel_names_interned() {
  name_table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  return t.by_text.size();
}

}  // namespace steptrace::detail

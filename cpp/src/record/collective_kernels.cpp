// Which kernels move data between GPUs. See collective_kernels.hpp.
#include "record/collective_kernels.hpp"

#include <cstddef>
#include <initializer_list>

namespace steptrace::detail {
namespace {

char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool is_lower(char c) noexcept { return c >= 'a' && c <= 'z'; }
bool is_upper(char c) noexcept { return c >= 'A' && c <= 'Z'; }

// The words, lower case, each found where a word of the name starts: after a character that is
// no letter (`_`, `::`, a space, `<`, a digit), or at a capital that follows a small letter
// (oneShotAllReduceKernel). "small_gather" holds "all_gather" mid-word and is no collective.
struct typed_words {
  std::string_view type;
  std::initializer_list<std::string_view> words;
  bool kernel;  // a kernel named so is a collective's ("send" or "broadcast" alone says nothing of one)
};
// First match wins: nccl:all_to_all launches NCCL's SendRecv kernels, so the all-to-all words come
// first. The libraries' own names say no kind.
const typed_words types[] = {
    {"all-to-all",
     {"alltoall", "all_to_all", "all2all", "deep_ep", "internode::", "intranode::", "internode_ll::"},
     true},
    {"reduce-scatter", {"reducescatter", "reduce_scatter"}, true},
    {"all-gather", {"allgather", "all_gather"}, true},
    {"all-reduce", {"allreduce", "all_reduce", "cross_device_reduce"}, true},
    {"send/recv", {"sendrecv", "send", "recv", "isend", "irecv"}, false},
    {"broadcast", {"broadcast", "bcast"}, false},
    {"", {"nccl", "rccl", "msccl", "nvshmem", "userbuffers"}, true},
};

bool word_at(std::string_view name, std::size_t i, std::string_view word) noexcept {
  if (i + word.size() > name.size()) return false;
  for (std::size_t j = 0; j < word.size(); ++j) {
    if (lower(name[i + j]) != word[j]) return false;
  }
  return true;
}

bool word_starts(std::string_view name, std::size_t i) noexcept {
  if (i == 0) return true;
  const char before = name[i - 1];
  if (!is_lower(before) && !is_upper(before)) return true;
  return is_upper(name[i]) && is_lower(before);
}

// Whether one of `list` is in `name` at a word's start.
template <class List>
bool has_word(std::string_view name, const List& list) noexcept {
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = lower(name[i]);
    if (c < 'a' || c > 'z' || !word_starts(name, i)) continue;
    for (std::string_view word : list) {
      if (word.front() == c && word_at(name, i, word)) return true;
    }
  }
  return false;
}

}  // namespace

bool is_collective_kernel(std::string_view name) noexcept {
  for (const typed_words& t : types) {
    if (t.kernel && has_word(name, t.words)) return true;
  }
  return false;
}

std::string_view collective_type(std::string_view name) noexcept {
  for (const typed_words& t : types) {
    if (has_word(name, t.words)) return t.type;
  }
  return {};
}

}  // namespace steptrace::detail

// Internal (not public API): summary::table()'s writer, and the blocks of the table written in
// files of their own (table.cpp writes the others and puts them in order).
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string>
#include <utility>

#include "base/utf8.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

// The table's text, a line at a time, each with its control characters escaped: a name from a
// trace (a kernel, an op, the GPU, a file) reaches no terminal as an escape sequence, and a
// newline in one forges no row.
class table_text {
 public:
  template <class... A>
  void operator()(A&&... args) {
    const std::string safe = escaped_controls(fmt::format(std::forward<A>(args)...));
    out_.append(safe.data(), safe.data() + safe.size());
    out_.push_back('\n');
  }
  // Another part's lines (those of rank_table.cpp, kernels.cpp, ...), escaped the same way.
  std::function<void(std::string)> sink() {
    return [this](const std::string& text) { (*this)("{}", text); };
  }
  std::string text() const { return fmt::to_string(out_); }

 private:
  fmt::memory_buffer out_;
};

// The device block (table_device.cpp): busy and idle, kernels, collectives, copies, memory,
// what was not recorded.
void device_lines(const summary& s, table_text& line);

}  // namespace steptrace::detail

// Numbers as a trace writes them: microseconds as decimal text to integer nanoseconds, and plain
// unsigned integers (ids, counts, shapes).
#include <cstdint>
#include <string_view>

#include "profiler/trace_events.hpp"

namespace steptrace::detail {

bool parse_us_as_ns(std::string_view text, std::uint64_t& ns) {
  std::size_t i = 0;
  if (i < text.size() && text[i] == '+') ++i;
  // Significant digits into an integer, remembering the decimal exponent.
  __extension__ typedef unsigned __int128 u128;
  u128 mantissa = 0;
  int exponent = 0, digits = 0;
  bool any = false, round_up = false;
  auto take = [&](char c, bool fraction) {
    any = true;
    if (digits < 30) {
      if (mantissa != 0 || c != '0') ++digits;
      mantissa = mantissa * 10 + static_cast<unsigned>(c - '0');
      if (fraction) --exponent;
    } else {
      if (!fraction) ++exponent;
      if (digits == 30 && c >= '5') round_up = true;
      ++digits;
    }
  };
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) take(text[i], false);
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) take(text[i], true);
  }
  if (!any) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool negative = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
    int e = 0;
    bool digit = false;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      digit = true;
      if (e < 100000) e = e * 10 + (text[i] - '0');
    }
    if (!digit) return false;
    exponent += negative ? -e : e;
  }
  if (i != text.size()) return false;
  if (round_up) ++mantissa;
  exponent += 3;  // microseconds to nanoseconds
  if (mantissa == 0) {
    ns = 0;
    return true;
  }
  for (; exponent > 0; --exponent) {
    mantissa *= 10;
    if (mantissa > UINT64_MAX) return false;
  }
  for (; exponent < 0; ++exponent) {
    const unsigned last = static_cast<unsigned>(mantissa % 10);
    mantissa /= 10;
    if (exponent == -1 && last >= 5) ++mantissa;  // round to the nearest nanosecond
    if (mantissa == 0) break;
  }
  if (mantissa > UINT64_MAX) return false;
  ns = static_cast<std::uint64_t>(mantissa);
  return true;
}

bool parse_uint_text(std::string_view text, std::uint64_t& out) {
  if (text.empty() || text.size() > 19) return false;
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  out = v;
  return true;
}

}  // namespace steptrace::detail

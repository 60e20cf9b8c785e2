#include "base/utf8.hpp"

#include <cstdint>

namespace steptrace::detail {
namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at s[i], or 0 (RFC 3629: no overlongs, no surrogates,
// nothing above U+10FFFF).
std::size_t sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<std::uint8_t>(s[k]); };
  const std::uint8_t b0 = byte(i);
  std::size_t n;
  std::uint8_t lo = 0x80, hi = 0xBF;  // range of the second byte
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

bool is_control(std::string_view s, std::size_t i, std::size_t n) {
  const auto b0 = static_cast<std::uint8_t>(s[i]);
  if (n == 1) return b0 < 0x20 || b0 == 0x7F;
  return n == 2 && b0 == 0xC2 && static_cast<std::uint8_t>(s[i + 1]) < 0xA0;  // U+0080..U+009F
}

}  // namespace

std::string printable_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = sequence_length(text, i);
    if (n == 0 || is_control(text, i, n)) {
      out += replacement;
      i += n == 0 ? 1 : n;
    } else {
      out.append(text, i, n);
      i += n;
    }
  }
  return out;
}

namespace {

std::string escaped(std::string_view text, bool backslash) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = sequence_length(text, i);
    if (backslash && n == 1 && text[i] == '\\') {
      out += "\\\\";
    } else if (n == 1 && (text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) {
      out += text[i] == '\t' ? "\\t" : text[i] == '\n' ? "\\n" : "\\r";
    } else if (n == 0 || is_control(text, i, n)) {
      for (std::size_t k = 0; k < (n == 0 ? 1 : n); ++k) {
        const auto b = static_cast<std::uint8_t>(text[i + k]);
        out += "\\x";
        out += hex[b >> 4];
        out += hex[b & 15];
      }
    } else {
      out.append(text, i, n);
    }
    i += n == 0 ? 1 : n;
  }
  return out;
}

}  // namespace

std::string escaped_utf8(std::string_view text) { return escaped(text, true); }
std::string escaped_controls(std::string_view text) { return escaped(text, false); }

}  // namespace steptrace::detail

namespace steptrace::detail {

std::size_t first_invalid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = sequence_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

}  // namespace steptrace::detail

#include "profiler/bytes/json_scanner.hpp"

#include <cstring>
#include <stdexcept>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace steptrace::detail {
namespace {

// The first '"' or '\\' in [p, e), or e.
inline const char* find_quote_or_backslash(const char* p, const char* e) {
#ifdef __SSE2__
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  while (e - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
    if (m != 0) return p + __builtin_ctz(static_cast<unsigned>(m));
    p += 16;
  }
#endif
  while (p < e && *p != '"' && *p != '\\') ++p;
  return p;
}

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Characters of a number's text (and of NaN, Infinity, true, false, null).
inline bool is_scalar_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '+' || c == '.';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void put_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

}  // namespace

json_scanner::json_scanner(byte_source& source, std::string name)
    : source_(source), name_(std::move(name)), buf_(buffer_bytes(source.size_hint())) {}

void json_scanner::fail(const std::string& what) const {
  throw std::invalid_argument(name_ + ": not valid JSON at byte " + std::to_string(offset()) + ": " + what);
}

bool json_scanner::fill(std::size_t want) {
  while (end_ - pos_ < want) {
    if (eof_) return false;
    if (pos_ > 0) {  // keep only what is not consumed yet
      std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
      base_ += pos_;
      end_ -= pos_;
      pos_ = 0;
    }
    if (end_ == buf_.size()) {
      if (buf_.size() > max_token) fail("a single value is longer than 64 MB");
      buf_.resize(buf_.size() * 2);
    }
    const std::size_t got = source_.read(buf_.data() + end_, buf_.size() - end_);
    if (got == 0) {
      eof_ = true;
    } else {
      end_ += got;
    }
  }
  return true;
}

char json_scanner::peek_slow() {
  for (;;) {
    while (pos_ < end_) {
      const char c = buf_[pos_];
      if (!is_space(c)) {
        if (c == '\0') fail("a NUL byte");
        return c;
      }
      ++pos_;
    }
    if (!fill(1)) return '\0';
  }
}

json_scanner::kind json_scanner::peek() {
  switch (peek_char()) {
    case '\0':
      return kind::end;
    case '{':
      return kind::object;
    case '[':
      return kind::array;
    case '"':
      return kind::string;
    case 't':
    case 'f':
    case 'n':
      return kind::literal;
    default:
      return kind::number;
  }
}

void json_scanner::expect(char c) {
  const char got = peek_char();
  if (got != c) {
    if (got == '\0') fail(std::string("the text ends early (a truncated file?) where '") + c + "' should be");
    fail(std::string("expected '") + c + "'");
  }
  ++pos_;
}

void json_scanner::enter_object() {
  expect('{');
  if (first_.size() >= max_depth) fail("nested deeper than 1024 levels");
  first_.push_back(1);
}

void json_scanner::enter_array() {
  expect('[');
  if (first_.size() >= max_depth) fail("nested deeper than 1024 levels");
  first_.push_back(1);
}

bool json_scanner::next_element() {
  char c = peek_char();
  if (c == ']') {
    ++pos_;
    first_.pop_back();
    return false;
  }
  if (!first_.back()) {
    if (c != ',') fail(c == '\0' ? "the text ends early (a truncated file?) inside an array" : "expected ',' or ']'");
    ++pos_;
  }
  first_.back() = 0;
  return true;
}

bool json_scanner::next_key(std::string_view& key) {
  char c = peek_char();
  if (c == '}') {
    ++pos_;
    first_.pop_back();
    return false;
  }
  if (!first_.back()) {
    if (c != ',') fail(c == '\0' ? "the text ends early (a truncated file?) inside an object" : "expected ',' or '}'");
    ++pos_;
    c = peek_char();
  }
  first_.back() = 0;
  if (c != '"') fail(c == '\0' ? "the text ends early (a truncated file?) inside an object" : "expected a key");
  const std::string_view k = take_string(key_);
  if (pos_ < end_ && buf_[pos_] == ':') {  // the common case: no refill, so `k` stays valid
    ++pos_;
    key = k;
    return true;
  }
  if (k.data() != key_.data()) key_.assign(k.data(), k.size());  // the buffer may move below
  expect(':');
  key = key_;
  return true;
}

std::size_t json_scanner::string_extent(bool& escaped) {
  escaped = false;
  std::size_t rel = 1;  // past the opening quote
  for (;;) {
    const char* from = buf_.data() + pos_ + rel;
    const char* hit = find_quote_or_backslash(from, buf_.data() + end_);
    rel += static_cast<std::size_t>(hit - from);
    if (pos_ + rel == end_) {
      if (!fill(rel + 1)) fail("a string is not closed: the text ends early (a truncated file?)");
      continue;
    }
    if (*hit == '"') return rel;
    escaped = true;
    if (!fill(rel + 2)) fail("a string is not closed: the text ends early (a truncated file?)");
    rel += 2;
  }
}

std::string_view json_scanner::take_string(std::string& out) {
  bool escaped = false;
  const std::size_t len = string_extent(escaped);
  const char* s = buf_.data() + pos_ + 1;
  const std::size_t n = len - 1;
  pos_ += len + 1;
  if (!escaped) return {s, n};
  out.clear();
  for (std::size_t i = 0; i < n; ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    const char e = s[++i];
    switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        auto hex4 = [&](std::size_t at) -> long {
          if (at + 4 > n) return -1;
          long v = 0;
          for (std::size_t k = 0; k < 4; ++k) {
            const int h = hex_value(s[at + k]);
            if (h < 0) return -1;
            v = v * 16 + h;
          }
          return v;
        };
        long cp = hex4(i + 1);
        if (cp < 0) fail("a bad \\u escape in a string");
        i += 4;
        if (cp >= 0xd800 && cp < 0xdc00 && i + 2 < n && s[i + 1] == '\\' && s[i + 2] == 'u') {
          const long low = hex4(i + 3);
          if (low >= 0xdc00 && low < 0xe000) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            i += 6;
          }
        }
        if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd;  // a lone surrogate
        put_utf8(out, static_cast<std::uint32_t>(cp));
        break;
      }
      default:
        fail("a bad escape in a string");
    }
  }
  return out;
}

std::string_view json_scanner::read_string() {
  const char c = peek_char();
  if (c != '"')
    fail(c == '\0' ? "the text ends early (a truncated file?) where a string should be" : "expected a string");
  return take_string(scratch_);
}

std::string_view json_scanner::read_number() {
  const char c = peek_char();
  if (c == '\0') fail("the text ends early (a truncated file?) where a number should be");
  std::size_t rel = 0;
  for (;;) {
    while (pos_ + rel < end_ && is_scalar_char(buf_[pos_ + rel])) ++rel;
    if (pos_ + rel < end_ || !fill(rel + 1)) break;
  }
  if (rel == 0) fail(std::string("unexpected '") + c + "'");
  const std::string_view text(buf_.data() + pos_, rel);
  pos_ += rel;
  return text;
}

bool json_scanner::read_scalar(std::string_view& text, bool& was_string) {
  const char c = peek_char();
  was_string = c == '"';
  if (was_string) {
    text = take_string(scratch_);
    return true;
  }
  if (c == '{' || c == '[') {
    skip_value();
    return false;
  }
  text = read_number();
  return true;
}

void json_scanner::skip_value() {
  const char c = peek_char();
  if (c == '"') {
    bool escaped = false;
    pos_ += string_extent(escaped) + 1;
    return;
  }
  if (c != '{' && c != '[') {
    read_number();
    return;
  }
  skip_nested(0);
}

void json_scanner::skip_object_rest() {
  first_.pop_back();
  skip_nested(1);
}

void json_scanner::skip_nested(std::uint64_t depth) {
  for (;;) {
    if (pos_ == end_ && !fill(1)) fail("the text ends early (a truncated file?) inside a value");
    const char* p = buf_.data() + pos_;
    const char* const e = buf_.data() + end_;
    for (; p < e; ++p) {
      const char ch = *p;
      if (ch == '"') break;
      if (ch == '{' || ch == '[') {
        ++depth;
      } else if (ch == '}' || ch == ']') {
        if (--depth == 0) {
          pos_ = static_cast<std::size_t>(p - buf_.data()) + 1;
          return;
        }
      }
    }
    pos_ = static_cast<std::size_t>(p - buf_.data());
    if (p < e) {  // a string: skipped whole
      bool escaped = false;
      pos_ += string_extent(escaped) + 1;
    }
  }
}

void json_scanner::expect_end() {
  if (peek_char() != '\0') fail("more text after the end of the document");
}

}  // namespace steptrace::detail

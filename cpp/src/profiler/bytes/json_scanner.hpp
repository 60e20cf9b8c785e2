// Internal (not public API): a pull reader of JSON text from a byte_source, for documents far
// larger than memory. It holds one chunk of the text at a time (plus the longest single token)
// and never recurses, so no nesting depth can exhaust the stack. Values the caller does not
// want are skipped without being decoded; that is where a trace's bytes mostly go.
//
//   json_scanner in(source, "trace.json");
//   in.enter_object();
//   std::string_view key;
//   while (in.next_key(key)) { if (key == "traceEvents") read(in); else in.skip_value(); }
//
// Errors throw std::invalid_argument naming the file and the byte offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/bytes/byte_source.hpp"

namespace steptrace::detail {

class json_scanner {
 public:
  enum class kind : std::uint8_t { object, array, string, number, literal, end };

  json_scanner(byte_source& source, std::string name);

  // The kind of the next value (after white space); `end` when the text has ended.
  kind peek();
  void enter_object();  // expects '{'
  void enter_array();   // expects '['
  // Inside an object: the next key (the ':' consumed), or false at its '}' (consumed).
  bool next_key(std::string_view& key);
  // Inside an array: true when another element follows, false at its ']' (consumed).
  bool next_element();
  // The next value, which must be a string, unescaped (valid until the next call).
  std::string_view read_string();
  // The next value's text, which must be a number (NaN, Infinity, -Infinity accepted too).
  std::string_view read_number();
  // The next value's text if it is a string or a number; skips and returns false otherwise.
  bool read_scalar(std::string_view& text, bool& was_string);
  void skip_value();
  // Inside an object: skips its remaining members and its '}'.
  void skip_object_rest();
  // After the document: only white space may follow.
  void expect_end();

  std::uint64_t offset() const noexcept { return base_ + pos_; }
  [[noreturn]] void fail(const std::string& what) const;

  static constexpr std::size_t max_depth = 1024;                   // nesting the caller walks
  static constexpr std::size_t max_token = std::size_t{64} << 20;  // longest string or number

 private:
  bool fill(std::size_t want);  // at least `want` bytes from pos_; false at the end of the text
  // After white space; '\0' at the end of the text. Inline: it runs before every token.
  char peek_char() {
    while (pos_ < end_) {
      const char c = buf_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t' && c != '\0') return c;
      if (c == '\0') return peek_slow();
      ++pos_;
    }
    return peek_slow();
  }
  char peek_slow();
  // The string at pos_: its length up to the closing quote (pos_ stays), and whether it holds
  // escapes. Refills as needed.
  std::size_t string_extent(bool& escaped);
  std::string_view take_string(std::string& into_if_escaped);
  void expect(char c);
  void skip_nested(std::uint64_t depth);  // until `depth` open containers have closed

  byte_source& source_;
  std::string name_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0;
  std::uint64_t base_ = 0;  // offset of buf_[0] in the text
  bool eof_ = false;
  std::vector<std::uint8_t> first_;  // per open container: no element read yet
  std::string scratch_, key_;
};

}  // namespace steptrace::detail

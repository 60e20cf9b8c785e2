// Internal (not public API): the bytes of a trace file, read in chunks so that a trace of any
// size is never held whole. A gzip file (by its magic bytes, whatever its name) is inflated as
// it is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "profiler/bytes/inflater.hpp"

namespace steptrace::detail {

class byte_source {
 public:
  virtual ~byte_source() = default;
  // Up to `n` bytes into `buf`; 0 only at the end. Throws std::invalid_argument (naming the
  // file) when the file cannot be read or its gzip stream is damaged or cut short.
  virtual std::size_t read(char* buf, std::size_t n) = 0;
  // Whether the bytes are inflated from gzip (for messages: "a gzip file of nothing").
  virtual bool compressed() const { return false; }
  // About how many bytes it gives in all, for reserving memory once: a regular file's size, a
  // gzip file's own record of its inflated size (mod 4 GiB); 0 when not known (a pipe).
  virtual std::uint64_t size_hint() const { return 0; }
};

// The bytes a reader's buffer holds for a source of about `size_hint` bytes (0: not known):
// 256 KiB, less for a smaller file (a 64th of it, 16 KiB at least), so that a small trace's
// reading costs little beside it. Every buffer of the read (the scanner's, the inflater's input,
// the read-ahead's chunks) is sized by this one rule.
inline std::size_t buffer_bytes(std::uint64_t size_hint) {
  constexpr std::uint64_t most = std::uint64_t{256} << 10, least = std::uint64_t{16} << 10;
  if (size_hint == 0 || size_hint / 64 >= most) return static_cast<std::size_t>(most);
  return static_cast<std::size_t>(size_hint / 64 > least ? size_hint / 64 : least);
}

// The most a gzip file may inflate to (16 GiB): a small file that would unpack to more is refused
// as it passes the bound, whatever it holds, so that what a file claims cannot set the time spent.
inline constexpr std::uint64_t max_inflated_bytes = std::uint64_t{16} << 30;

// Opens `path` for reading: a regular file or a pipe (`<(zcat run.json.gz)`, `-`'s
// /dev/stdin), read once, as it comes. Throws std::invalid_argument naming it (as `name`, when
// given) when it cannot be opened or is neither (a directory, a device such as /dev/zero). A
// gzip stream's problems are named as such: cut short, a bad checksum or length, bytes after
// its end that are no further gzip member, more than max_inflated_bytes.
// `inflated_limit`: max_inflated_bytes, or less (tests). `engine`: the inflater for a gzip file
// (tests and benchmarks name one; by default the fastest this build has).
std::unique_ptr<byte_source> open_trace_file(const std::string& path, const std::string& name = "",
                                             std::uint64_t inflated_limit = max_inflated_bytes,
                                             inflater::engine engine = default_engine());

// The bytes of a string (tests).
std::unique_ptr<byte_source> bytes_of(std::string text);

// `prefix`, then the rest of `rest`: bytes already read from a source handed back in front of it.
std::unique_ptr<byte_source> prefixed(std::string prefix, std::unique_ptr<byte_source> rest);

}  // namespace steptrace::detail

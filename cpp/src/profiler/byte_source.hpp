// Internal (not public API): the bytes of a trace file, read in chunks so that a trace of any
// size is never held whole. A gzip file (by its magic bytes, whatever its name) is inflated as
// it is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace steptrace::detail {

class byte_source {
 public:
  virtual ~byte_source() = default;
  // Up to `n` bytes into `buf`; 0 only at the end. Throws std::invalid_argument (naming the
  // file) when the file cannot be read or its gzip stream is damaged or cut short.
  virtual std::size_t read(char* buf, std::size_t n) = 0;
};

// Opens `path` for reading: a regular file or a pipe (`<(zcat run.json.gz)`), read once. Throws
// std::invalid_argument naming it (as `name`, when given) when it cannot be opened or is neither
// (a directory, a device such as /dev/zero).
std::unique_ptr<byte_source> open_trace_file(const std::string& path, const std::string& name = "");

// The bytes of a string (tests).
std::unique_ptr<byte_source> bytes_of(std::string text);

}  // namespace steptrace::detail

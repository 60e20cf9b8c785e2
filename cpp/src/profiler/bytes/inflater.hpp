// Internal (not public API): a gzip member's deflate stream inflated by one engine: ISA-L's
// igzip where the build found it (about twice zlib's speed on profiler traces,
// benchmarks/bench_inflate.cpp), else zlib. Both give the same bytes and the same verdicts;
// byte_source.cpp turns the verdicts into messages (cpp/src/profiler/README.md, "Reading torch.profiler traces").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace steptrace::detail {

class inflater {
 public:
  enum class engine { zlib, isal };
  enum class status {
    more,          // output given, or more input wanted
    member_end,    // the member's end, its checksum and length verified
    bad_checksum,  // the member's CRC does not match its data
    bad_length,    // the member's length (ISIZE) does not match its data
    damaged,       // anything else wrong with the data: `problem()` says what
  };
  virtual ~inflater() = default;

  // The input; the engine reads it from `next_in()`, `avail_in()` bytes are left.
  virtual void give(const unsigned char* in, std::size_t n) = 0;
  virtual const unsigned char* next_in() const = 0;
  virtual std::size_t avail_in() const = 0;
  // Inflates into out[0..n): `made` bytes written.
  virtual status inflate(unsigned char* out, std::size_t n, std::size_t& made) = 0;
  // Starts the next member, at the input left.
  virtual void restart() = 0;
  virtual std::string problem() const = 0;  // for `damaged`
};

// Throws std::runtime_error when the engine cannot start.
std::unique_ptr<inflater> make_inflater(inflater::engine e);
// The engine a gzip file is read with: ISA-L where built with it.
inflater::engine default_engine();
// Whether this build has `e` (zlib always).
bool has_engine(inflater::engine e);

}  // namespace steptrace::detail

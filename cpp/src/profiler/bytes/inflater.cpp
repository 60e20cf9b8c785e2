#include "profiler/bytes/inflater.hpp"

#include <zlib.h>

#include <cstring>
#include <stdexcept>

#ifdef STEPTRACE_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

namespace steptrace::detail {
namespace {

class zlib_inflater final : public inflater {
 public:
  zlib_inflater() {
    std::memset(&z_, 0, sizeof z_);
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error("zlib could not start");
  }
  ~zlib_inflater() override { inflateEnd(&z_); }

  void give(const unsigned char* in, std::size_t n) override {
    z_.next_in = const_cast<Bytef*>(in);
    z_.avail_in = static_cast<uInt>(n);
  }
  const unsigned char* next_in() const override { return z_.next_in; }
  std::size_t avail_in() const override { return z_.avail_in; }

  status inflate(unsigned char* out, std::size_t n, std::size_t& made) override {
    z_.next_out = out;
    z_.avail_out = static_cast<uInt>(n);
    const int rc = ::inflate(&z_, Z_NO_FLUSH);
    made = n - z_.avail_out;
    if (rc == Z_STREAM_END) return status::member_end;
    if (rc == Z_DATA_ERROR && z_.msg != nullptr && std::strstr(z_.msg, "check") != nullptr) {
      return std::strstr(z_.msg, "length") != nullptr ? status::bad_length : status::bad_checksum;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      problem_ = z_.msg ? z_.msg : "inflate failed";
      return status::damaged;
    }
    return status::more;
  }

  void restart() override {
    if (inflateReset(&z_) != Z_OK) throw std::runtime_error("zlib could not restart");
  }
  std::string problem() const override { return problem_; }

 private:
  z_stream z_;
  std::string problem_;
};

#ifdef STEPTRACE_HAVE_ISAL
// igzip inflates the deflate data and checks the trailer (crc_flag ISAL_GZIP_NO_HDR_VER); the
// header is read here, a byte at a time as it comes: igzip's own reading of it fails a header
// CRC (FHCRC) that arrives in two pieces (ISA-L 2.30). igzip names a bad CRC and a bad length
// alike, so the trailer it checked (the last 8 bytes it took) tells which.
class isal_inflater final : public inflater {
 public:
  isal_inflater() { restart(); }

  void give(const unsigned char* in, std::size_t n) override {
    s_.next_in = const_cast<std::uint8_t*>(in);
    s_.avail_in = static_cast<std::uint32_t>(n);
  }
  const unsigned char* next_in() const override { return s_.next_in; }
  std::size_t avail_in() const override { return s_.avail_in; }

  status inflate(unsigned char* out, std::size_t n, std::size_t& made) override {
    made = 0;
    if (header_ != header_state::done && !read_header())
      return header_ == header_state::bad ? status::damaged : status::more;
    const unsigned char* from = s_.next_in;
    s_.next_out = out;
    s_.avail_out = static_cast<std::uint32_t>(n);
    const int rc = isal_inflate(&s_);
    made = n - s_.avail_out;
    keep_last(from, static_cast<std::size_t>(s_.next_in - from));
    if (rc == ISAL_INCORRECT_CHECKSUM) {
      const std::uint32_t crc = last_[0] | last_[1] << 8 | last_[2] << 16 | static_cast<std::uint32_t>(last_[3]) << 24;
      return crc != s_.crc ? status::bad_checksum : status::bad_length;
    }
    if (rc < 0 || rc == ISAL_NEED_DICT) {
      problem_ = rc == ISAL_INVALID_LOOKBACK ? "invalid distance too far back"
                 : rc == ISAL_INVALID_SYMBOL ? "invalid code"
                 : rc == ISAL_NEED_DICT      ? "a preset dictionary"
                                             : "invalid block";
      return status::damaged;
    }
    return s_.block_state == ISAL_BLOCK_FINISH ? status::member_end : status::more;
  }

  void restart() override {
    const unsigned char* in = s_.next_in;
    const std::uint32_t avail = s_.avail_in;
    isal_inflate_init(&s_);
    s_.crc_flag = ISAL_GZIP_NO_HDR_VER;
    s_.next_in = const_cast<std::uint8_t*>(in);
    s_.avail_in = avail;
    std::memset(last_, 0, sizeof last_);
    header_ = header_state::fixed;
    at_ = 0;
    header_crc_ = crc32(0, nullptr, 0);
  }
  std::string problem() const override { return problem_; }

 private:
  enum class header_state { fixed, extra_length, extra, name, comment, crc, done, bad };

  // The gzip header (RFC 1952) from the input as it comes; true once it is whole.
  bool read_header() {
    while (header_ != header_state::done && header_ != header_state::bad && s_.avail_in > 0) {
      const unsigned char c = *s_.next_in++;
      --s_.avail_in;
      if (header_ != header_state::crc) header_crc_ = crc32(header_crc_, &c, 1);
      switch (header_) {
        case header_state::fixed:
          fixed_[at_++] = c;
          if (at_ == 10) {
            if (fixed_[0] != 0x1f || fixed_[1] != 0x8b) return fail("incorrect header check");
            if (fixed_[2] != 8) return fail("unknown compression method");
            if (fixed_[3] & 0xe0) return fail("unknown header flags set");
            at_ = 0;
            next_field(header_state::fixed);
          }
          break;
        case header_state::extra_length:
          extra_left_ |= static_cast<std::uint32_t>(c) << (8 * at_++);
          if (at_ == 2) {
            at_ = 0;
            header_ = header_state::extra;
            if (extra_left_ == 0) next_field(header_state::extra);
          }
          break;
        case header_state::extra:
          if (--extra_left_ == 0) next_field(header_state::extra);
          break;
        case header_state::name:
        case header_state::comment:
          if (c == 0) next_field(header_);
          break;
        case header_state::crc:
          stored_crc_ |= static_cast<std::uint32_t>(c) << (8 * at_++);
          if (at_ == 2) {
            if (stored_crc_ != (header_crc_ & 0xffff)) return fail("header crc mismatch");
            header_ = header_state::done;
          }
          break;
        case header_state::done:
        case header_state::bad:
          break;
      }
    }
    return header_ == header_state::done;
  }

  // The field after `after` that the header's flags say it has.
  void next_field(header_state after) {
    const unsigned char flags = fixed_[3];
    const header_state order[] = {header_state::fixed, header_state::extra, header_state::name, header_state::comment,
                                  header_state::crc};
    const unsigned char flag_of[] = {0, 0x04, 0x08, 0x10, 0x02};
    std::size_t k = 0;
    while (order[k] != after) ++k;
    for (++k; k < 5; ++k) {
      if (flags & flag_of[k]) {
        header_ = order[k] == header_state::extra ? header_state::extra_length : order[k];
        extra_left_ = stored_crc_ = 0;
        at_ = 0;
        return;
      }
    }
    header_ = header_state::done;
  }

  bool fail(const char* what) {
    problem_ = what;
    header_ = header_state::bad;
    return false;
  }

  // The last 8 input bytes taken: after a member's end, its trailer (CRC, then length).
  void keep_last(const unsigned char* p, std::size_t n) {
    if (n >= sizeof last_) {
      std::memcpy(last_, p + n - sizeof last_, sizeof last_);
    } else if (n > 0) {
      std::memmove(last_, last_ + n, sizeof last_ - n);
      std::memcpy(last_ + sizeof last_ - n, p, n);
    }
  }

  inflate_state s_{};
  unsigned char last_[8] = {};
  header_state header_ = header_state::fixed;
  unsigned char fixed_[10] = {};
  std::uint32_t at_ = 0, extra_left_ = 0, stored_crc_ = 0;
  uLong header_crc_ = 0;
  std::string problem_;
};
#endif

}  // namespace

bool has_engine(inflater::engine e) {
#ifdef STEPTRACE_HAVE_ISAL
  (void)e;
  return true;
#else
  return e == inflater::engine::zlib;
#endif
}

inflater::engine default_engine() {
  return has_engine(inflater::engine::isal) ? inflater::engine::isal : inflater::engine::zlib;
}

std::unique_ptr<inflater> make_inflater(inflater::engine e) {
#ifdef STEPTRACE_HAVE_ISAL
  if (e == inflater::engine::isal) return std::make_unique<isal_inflater>();
#endif
  if (e != inflater::engine::zlib) throw std::runtime_error("this build has no ISA-L inflater");
  return std::make_unique<zlib_inflater>();
}

}  // namespace steptrace::detail

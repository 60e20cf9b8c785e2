#include "profiler/bytes/byte_source.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "profiler/bytes/inflater.hpp"
#include "record/cpu_load.hpp"

namespace steptrace::detail {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::invalid_argument(path + ": " + what);
}

class file_source final : public byte_source {
 public:
  file_source(std::FILE* f, std::string path, std::uint64_t size) : f_(f), path_(std::move(path)), size_(size) {}
  ~file_source() override { std::fclose(f_); }
  std::size_t read(char* buf, std::size_t n) override {
    const std::size_t got = std::fread(buf, 1, n, f_);
    if (got == 0 && std::ferror(f_)) fail(path_, std::string("cannot be read: ") + std::strerror(errno));
    return got;
  }
  std::uint64_t size_hint() const override { return size_; }

 private:
  std::FILE* f_;
  std::string path_;
  std::uint64_t size_;  // a regular file's size; 0 for a pipe
};

// gzip files being read in this process now: a job's rank files are read on every core at once,
// and then a read-ahead thread each would only contend with the other readers.
std::atomic<unsigned> gzip_files_open{0};

// Inflates gzip members one after another (a concatenated .gz is one stream of bytes), with the
// fastest engine this build has (profiler/bytes/inflater.hpp).
class gzip_source final : public byte_source {
 public:
  gzip_source(std::unique_ptr<byte_source> raw, std::string path, std::uint64_t limit, std::uint64_t inflated_hint,
              inflater::engine engine)
      : raw_(std::move(raw)),
        path_(std::move(path)),
        in_(buffer_bytes(raw_->size_hint())),
        limit_(limit),
        hint_(inflated_hint) {
    try {
      engine_ = make_inflater(engine);
    } catch (const std::runtime_error& e) {
      fail(path_, e.what());
    }
    gzip_files_open.fetch_add(1);
  }
  ~gzip_source() override { gzip_files_open.fetch_sub(1); }

  std::size_t read(char* buf, std::size_t n) override {
    n = std::min<std::size_t>(n, std::size_t{1} << 30);  // what one engine call takes (32-bit counts)
    auto* out = reinterpret_cast<unsigned char*>(buf);
    std::size_t made = 0;
    while (made == 0) {
      if (engine_->avail_in() == 0) {
        const std::size_t got = raw_->read(in_.data(), in_.size());
        if (got == 0) {
          if (!member_done_) fail(path_, "the gzip stream ends early: the file is truncated");
          return 0;
        }
        engine_->give(reinterpret_cast<const unsigned char*>(in_.data()), got);
      }
      if (member_done_) {  // another member may follow the one that ended: its magic bytes, or nothing
        next_member();
        continue;
      }
      switch (engine_->inflate(out, n, made)) {
        case inflater::status::more:
          break;
        case inflater::status::member_end:
          member_done_ = true;
          break;
        case inflater::status::bad_checksum:
          fail(path_, "a damaged gzip file: its checksum (CRC) does not match its data (incorrect data check)");
        case inflater::status::bad_length:
          fail(path_, "a damaged gzip file: its length does not match its data (incorrect length check)");
        case inflater::status::damaged:
          fail(path_, "a damaged gzip file (" + engine_->problem() + ")");
      }
      if (n == 0) return 0;
    }
    inflated_ += made;
    if (inflated_ > limit_) {
      fail(path_, "a gzip file that inflates to more than " + std::to_string(limit_) +
                      " bytes, more than steptrace reads (" + std::to_string(max_inflated_bytes >> 30) + " GiB)");
    }
    return made;
  }

  bool compressed() const override { return true; }
  std::uint64_t size_hint() const override { return hint_; }

 private:
  std::unique_ptr<byte_source> raw_;
  std::string path_;
  std::vector<char> in_;
  std::unique_ptr<inflater> engine_;
  bool member_done_ = false;
  std::uint64_t inflated_ = 0, limit_, hint_;

  // After a member's end, with input at hand: starts the next member, or passes over the zeros
  // some tools pad with. Anything else is bytes that are not gzip: an error.
  void next_member() {
    if (engine_->next_in()[0] == 0x1f) {
      try {
        engine_->restart();
      } catch (const std::runtime_error& e) {
        fail(path_, e.what());
      }
      member_done_ = false;
      return;
    }
    const unsigned char* p = engine_->next_in();
    std::size_t left = engine_->avail_in();
    while (left > 0 && *p == 0) ++p, --left;
    engine_->give(p, left);
    if (left > 0) fail(path_, "bytes after the end of its gzip data that are not another gzip member");
  }
};

// The inflated size below which a gzip file is inflated on the reader's thread.
constexpr std::uint64_t min_read_ahead_bytes = std::uint64_t{4} << 20;

// Reads `inner` on a thread of its own, a few chunks ahead of the reader: a gzip file is inflated
// while the JSON before it is parsed, so on two cores reading it costs about what inflating it
// does, not the sum of both. At most `slots` chunks wait, and one is read from, so little memory
// is held. What the inner source throws reaches the reader where the serial read would have
// thrown it: after the bytes before it.
class read_ahead_source final : public byte_source {
 public:
  static constexpr std::size_t slots = 4;

  explicit read_ahead_source(std::unique_ptr<byte_source> inner)
      : inner_(std::move(inner)), compressed_(inner_->compressed()), chunk_bytes_(buffer_bytes(inner_->size_hint())) {
    // Every chunk allocated here, on the reader's thread: memory the worker allocated would stay
    // in its own arena once freed, unused by the analysis that follows the read.
    free_.resize(slots + 1);
    for (std::vector<char>& chunk : free_) chunk.reserve(chunk_bytes_);
    worker_ = std::thread([this] { fill(); });
  }
  ~read_ahead_source() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    worker_.join();
  }

  std::size_t read(char* buf, std::size_t n) override {
    if (at_ == current_.size()) {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!current_.empty()) free_.push_back(std::move(current_));  // its bytes are all handed out
      current_.clear();
      at_ = 0;
      changed_.wait(lock, [&] { return !ready_.empty() || done_; });
      if (ready_.empty()) {
        if (error_) std::rethrow_exception(error_);
        return 0;
      }
      current_ = std::move(ready_.front());
      ready_.pop_front();
      at_ = 0;
      changed_.notify_all();
    }
    const std::size_t k = std::min(n, current_.size() - at_);
    std::memcpy(buf, current_.data() + at_, k);
    at_ += k;
    return k;
  }

  bool compressed() const override { return compressed_; }
  std::uint64_t size_hint() const override { return inner_->size_hint(); }

 private:
  void fill() {
    for (;;) {
      std::vector<char> chunk;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || ready_.size() < slots; });
        if (stop_) return;
        if (!free_.empty()) {
          chunk = std::move(free_.back());
          free_.pop_back();
        }
      }
      std::size_t got = 0;
      std::exception_ptr error;
      try {
        chunk.resize(chunk_bytes_);  // within its capacity: the worker never allocates
        while (got < chunk.size()) {
          const std::size_t k = inner_->read(chunk.data() + got, chunk.size() - got);
          if (k == 0) break;
          got += k;
        }
      } catch (...) {
        error = std::current_exception();
      }
      chunk.resize(std::min(got, chunk.size()));
      std::lock_guard<std::mutex> lock(mutex_);
      if (got != 0) ready_.push_back(std::move(chunk));
      if (got < chunk_bytes_ || error) {
        error_ = error;
        done_ = true;
      }
      changed_.notify_all();
      if (done_) return;
    }
  }

  std::unique_ptr<byte_source> inner_;
  const bool compressed_;
  const std::size_t chunk_bytes_;  // buffer_bytes of the inflated size
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::vector<char>> ready_;  // filled, oldest first
  std::vector<std::vector<char>> free_;  // handed out whole: for the next fill
  std::exception_ptr error_;             // what the inner source threw, after the chunks before it
  bool stop_ = false, done_ = false;
  std::vector<char> current_;  // the reader's chunk (the reader's thread only)
  std::size_t at_ = 0;
};

// Hands back bytes already read, then the rest of the source.
class prefixed_source final : public byte_source {
 public:
  prefixed_source(std::string prefix, std::unique_ptr<byte_source> rest)
      : prefix_(std::move(prefix)), rest_(std::move(rest)) {}
  std::size_t read(char* buf, std::size_t n) override {
    if (at_ < prefix_.size()) {
      const std::size_t k = std::min(n, prefix_.size() - at_);
      std::memcpy(buf, prefix_.data() + at_, k);
      at_ += k;
      return k;
    }
    return rest_ ? rest_->read(buf, n) : 0;
  }
  std::uint64_t size_hint() const override { return rest_ ? rest_->size_hint() : prefix_.size(); }

 private:
  std::string prefix_;
  std::size_t at_ = 0;
  std::unique_ptr<byte_source> rest_;
};

}  // namespace

std::unique_ptr<byte_source> open_trace_file(const std::string& path, const std::string& name,
                                             std::uint64_t inflated_limit, inflater::engine engine) {
  const std::string& shown = name.empty() ? path : name;
  if (path.find('\0') != std::string::npos) fail("<path>", "a file name cannot hold a NUL byte");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(shown, std::string("cannot be opened: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) fail(shown, "is not a regular file or a pipe");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) fail(shown, std::string("cannot be opened: ") + std::strerror(errno));
  const bool regular = S_ISREG(st.st_mode);
  auto raw = std::make_unique<file_source>(f, shown, regular ? static_cast<std::uint64_t>(st.st_size) : 0);
  char magic[2] = {0, 0};
  std::size_t got = 0;
  while (got < 2) {
    const std::size_t k = raw->read(magic + got, 2 - got);
    if (k == 0) break;
    got += k;
  }
  auto plain = std::make_unique<prefixed_source>(std::string(magic, got), std::move(raw));
  if (got == 2 && static_cast<unsigned char>(magic[0]) == 0x1f && static_cast<unsigned char>(magic[1]) == 0x8b) {
    // A gzip file ends with its last member's inflated size, mod 4 GiB (ISIZE): read in place.
    unsigned char isize[4] = {0, 0, 0, 0};
    std::uint64_t inflated_hint = 0;
    if (regular && st.st_size >= 18 && ::pread(::fileno(f), isize, 4, st.st_size - 4) == 4) {
      inflated_hint = isize[0] | isize[1] << 8 | isize[2] << 16 | static_cast<std::uint64_t>(isize[3]) << 24;
    }
    auto inflated = std::make_unique<gzip_source>(std::move(plain), shown, inflated_limit, inflated_hint, engine);
    // Ahead on a thread where there is a core for it (two for each gzip file being read), and
    // never from a pipe, whose writer may stall: a reader that stops early must not wait on a
    // read that may not return. Nor for a small file: it inflates in a few ms, less than the
    // thread's chunks and stack would cost beside it. (A hint below the file's own size has
    // wrapped past 4 GiB.)
    const bool small = inflated_hint >= static_cast<std::uint64_t>(st.st_size) && inflated_hint < min_read_ahead_bytes;
    if (regular && !small && 2 * gzip_files_open.load() <= usable_cpus()) {
      return std::make_unique<read_ahead_source>(std::move(inflated));
    }
    return inflated;
  }
  return plain;
}

std::unique_ptr<byte_source> prefixed(std::string prefix, std::unique_ptr<byte_source> rest) {
  return std::make_unique<prefixed_source>(std::move(prefix), std::move(rest));
}

std::unique_ptr<byte_source> bytes_of(std::string text) {
  return std::make_unique<prefixed_source>(std::move(text), nullptr);
}

}  // namespace steptrace::detail

// Files from outside, read as the hostile ones come: gzip problems named as such (cut short, a
// bad checksum or length, bytes after its end), inflation and events bounded with a refusal
// naming the bound, and the one reader (read_file) deciding summary or trace by the top-level
// keys however far in, from a file or a pipe read as it comes.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "helpers.hpp"
#include "profiler/bytes/byte_source.hpp"
#include "profiler/trace_events.hpp"
#include "record/cpu_load.hpp"
#include "steptrace/profiler_trace.hpp"
#include "steptrace/steptrace.hpp"
#include "trace_files.hpp"

using namespace steptrace;
using namespace steptrace::testing;
using Catch::Matchers::Contains;

namespace {

// `header`: the member's optional header fields (a name, a comment, a CRC...), or none.
std::string gzip(const std::string& text, gz_header* header = nullptr) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  if (header != nullptr) REQUIRE(deflateSetHeader(&z, header) == Z_OK);
  std::string out(deflateBound(&z, text.size()) + 128, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string all_of(detail::byte_source& s) {
  std::string out;
  char buf[4096];
  while (const std::size_t n = s.read(buf, sizeof buf)) out.append(buf, n);
  return out;
}

// The inflater the gzip tests read with: each engine this build has, in turn.
detail::inflater::engine engine_under_test = detail::default_engine();

std::string read_through(const std::string& bytes, std::uint64_t limit = detail::max_inflated_bytes) {
  const temp_file f(bytes, ".json.gz");
  const auto source = detail::open_trace_file(f.path, "run.json.gz", limit, engine_under_test);
  return all_of(*source);
}

// A gzip member whose header holds every optional field: a name, a comment, extra bytes, a CRC.
std::string gzip_with_header_fields(const std::string& text) {
  std::string name = "run.json", comment = "from a test", extra = "xy";
  gz_header h{};
  h.name = reinterpret_cast<Bytef*>(name.data());
  h.comment = reinterpret_cast<Bytef*>(comment.data());
  h.extra = reinterpret_cast<Bytef*>(extra.data());
  h.extra_len = static_cast<uInt>(extra.size());
  h.hcrc = 1;
  return gzip(text, &h);
}

std::string a_trace(int steps) {
  trace_text t;
  for (int i = 0; i < steps; ++i) {
    t.add("user_annotation", "ProfilerStep#" + std::to_string(i), 1, i * 100.0, 90);
    t.add("cpu_op", "aten::mm", 1, i * 100.0 + 10, 50);
  }
  return t.json();
}

std::string a_summary() {
  tracer t(quiet());
  const phase_id decode = register_phase("traceEvents");  // a phase named as a trace's key
  for (int i = 0; i < 3; ++i) {
    scoped_step s(t);
    scoped_phase p(t, decode);
  }
  return t.summary().json();
}

}  // namespace

TEST_CASE("gzip: each problem is named as a gzip problem; padding and further members are read; by each inflater",
          "[files]") {
  const auto engine = GENERATE(detail::inflater::engine::zlib, detail::inflater::engine::isal);
  if (!detail::has_engine(engine)) return;  // a build without ISA-L: zlib alone
  engine_under_test = engine;
  INFO((engine == detail::inflater::engine::zlib ? "zlib" : "ISA-L"));
  const std::string text = a_trace(3), z = gzip(text);
  CHECK(read_through(z) == text);
  CHECK(read_through(gzip_with_header_fields(text)) == text);
  std::string body = z;
  body[body.size() / 2] ^= 0x5a;  // inside the deflate data
  CHECK_THROWS_WITH(read_through(body), Contains("run.json.gz: a damaged gzip file"));
  CHECK(read_through(z + gzip("\n")) == text + "\n");       // two members: one stream of bytes
  CHECK(read_through(z + std::string(512, '\0')) == text);  // zeros some tools pad with
  CHECK_THROWS_WITH(read_through(z.substr(0, z.size() / 2)), Contains("run.json.gz: the gzip stream ends early"));
  std::string crc = z;
  crc[crc.size() - 8] ^= 0x55;  // the CRC-32 of the trailer
  CHECK_THROWS_WITH(read_through(crc), Contains("run.json.gz: a damaged gzip file: its checksum (CRC) does not match"));
  std::string length = z;
  length[length.size() - 4] ^= 0x01;  // the length of the trailer
  CHECK_THROWS_WITH(read_through(length), Contains("its length does not match"));
  CHECK_THROWS_WITH(read_through(z + "trailing text"), Contains("bytes after the end of its gzip data"));
  CHECK_THROWS_WITH(read_through(z, 100),
                    Contains("inflates to more than 100 bytes, more than steptrace reads (16 GiB)"));
  engine_under_test = detail::default_engine();
}

TEST_CASE("a trace's kept events are bounded, with the bound named", "[files]") {
  const std::string text = a_trace(20);  // 40 events kept
  CHECK(detail::read_trace_events(*detail::bytes_of(text), "t.json", 40).events.size() == 40);
  CHECK_THROWS_WITH(
      detail::read_trace_events(*detail::bytes_of(text), "t.json", 39),
      Contains("t.json") && Contains("t.json: more than 39 events, more than steptrace reads (10000000, at byte"));
}

TEST_CASE("read_file: a summary or a trace by the top-level keys, however far in; gzipped summaries too", "[files]") {
  const std::string summary_text = a_summary();
  const temp_file plain(summary_text);
  const summary s = steptrace::read_file(plain.path);
  CHECK(s.steps == 3);
  CHECK(s.phase("traceEvents") != nullptr);  // a summary with a phase named traceEvents is a summary
  const temp_file zipped(gzip(summary_text), ".json.gz");
  CHECK(steptrace::read_file(zipped.path).steps == 3);
  CHECK_THROWS_WITH(steptrace::read_file(plain.path, {"execute_model", ""}),
                    Contains("names a range of a torch.profiler trace, and this is a summary"));

  // a valid trace whose traceEvents come after 200 KB of other keys is a trace
  std::string far = a_trace(4);
  REQUIRE(far.front() == '{');
  far.insert(1, "\"otherData\": {\"notes\": \"" + std::string(200 * 1024, 'n') + "\"}, ");
  const summary t = steptrace::read_file(temp_file(far).path);
  CHECK(t.steps == 4);
  CHECK(steptrace::read_file(temp_file(gzip(far), ".json.gz").path).steps == 4);

  CHECK_THROWS_WITH(steptrace::read_file(temp_file("").path, {"", "empty.json"}),
                    Contains("empty.json: the file is empty"));
  CHECK_THROWS_WITH(steptrace::read_file(temp_file(gzip(""), ".json.gz").path, {"", "nothing.json.gz"}),
                    Contains("nothing.json.gz: a gzip file of nothing"));
  CHECK_THROWS_WITH(steptrace::read_file(temp_file("{\"schemaVersion\": 1}").path, {"", "k.json"}),
                    Contains("k.json: not a Chrome trace (no traceEvents array)"));
  CHECK_THROWS_WITH(steptrace::read_file(temp_file("{\"a\": \"\xff\"}").path, {"", "b.json"}),
                    Contains("b.json: not a steptrace summary: not UTF-8 text (byte 7)"));
  // PyTorch's execution trace (HTA's test data keeps one beside its profiler trace): named, and
  // pointed at the file steptrace reads; another schema without "nodes" is a summary of another version
  const std::string et =
      R"({"schema": "1.0.1", "pid": 5, "time": "2023-07-14", "start_ts": 6, "nodes": [{"name": "x"}]})";
  CHECK_THROWS_WITH(steptrace::read_file(temp_file(et).path, {"", "et.json"}),
                    Contains("et.json: a PyTorch execution trace") && Contains("the JSON with \"traceEvents\""));
  CHECK_THROWS_WITH(steptrace::read_file(temp_file(gzip(et), ".json.gz").path, {"", "et.json.gz"}),
                    Contains("et.json.gz: a PyTorch execution trace"));
  CHECK_THROWS_WITH(
      steptrace::read_file(temp_file(R"({"schema": "steptrace.summary/9", "nodes": []})").path, {"", "s.json"}),
      Contains("s.json: unsupported summary schema \"steptrace.summary/9\""));
  CHECK_THROWS_WITH(steptrace::read_file(temp_file(R"({"schema": "other/2", "steps": 3})").path, {"", "o.json"}),
                    Contains("o.json: unsupported summary schema \"other/2\""));
}

TEST_CASE("read_file: a pipe is read as it comes, never copied aside", "[files]") {
  const std::string text = a_trace(5), path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                                              "/steptrace-fifo-" + std::to_string(::getpid());
  ::unlink(path.c_str());
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  const pid_t writer = ::fork();
  if (writer == 0) {
    const int fd = ::open(path.c_str(), O_WRONLY);
    const std::string z = gzip(text);
    const bool ok = fd >= 0 && ::write(fd, z.data(), z.size()) == static_cast<ssize_t>(z.size());
    std::_Exit(ok ? 0 : 1);
  }
  const summary s = steptrace::read_file(path, {"", "<pipe>"});
  int status = 0;
  ::waitpid(writer, &status, 0);
  ::unlink(path.c_str());
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(s.steps == 5);
}

TEST_CASE(
    "read_file: seeded mutations of gzip members of a trace and a summary never escape as anything but "
    "invalid_argument",
    "[files]") {
  const std::string trace_z = gzip(a_trace(6)) + gzip("\n"), summary_z = gzip(a_summary());
  std::mt19937 rng(38);
  int read = 0;
  for (int i = 0; i < 400; ++i) {
    std::string bytes = i % 2 ? trace_z : summary_z;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % bytes.size();
      switch (rng() % 4) {
        case 0:
          bytes[at] = static_cast<char>(rng());
          break;  // a byte changed
        case 1:
          bytes.erase(at, 1 + rng() % 16);
          break;  // bytes lost
        case 2:
          bytes.insert(at, std::string(1 + rng() % 8, static_cast<char>(rng())));
          break;
        default:
          bytes.resize(at);
          break;  // cut short
      }
      if (bytes.empty()) bytes = "\x1f";
    }
    try {
      steptrace::read_file(temp_file(bytes, ".json.gz").path);
      ++read;
    } catch (const std::invalid_argument&) {
    }
  }
  INFO(read << " of 400 mutations still read");
  CHECK(read < 400);
}

namespace {

// What zlib alone makes of a gzip file's bytes, member after member: the reference.
std::string inflated_by_zlib(const std::string& bytes) {
  std::string out;
  z_stream z{};
  REQUIRE(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  char buf[1 << 16];
  while (z.avail_in > 0) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    const int rc = inflate(&z, Z_NO_FLUSH);
    REQUIRE((rc == Z_OK || rc == Z_STREAM_END));
    out.append(buf, sizeof buf - z.avail_out);
    if (rc == Z_STREAM_END && z.avail_in > 0) REQUIRE(inflateReset(&z) == Z_OK);
  }
  inflateEnd(&z);
  return out;
}

std::string file_bytes(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::string out;
  char buf[1 << 16];
  while (const std::size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  std::fclose(f);
  return out;
}

}  // namespace

TEST_CASE("gzip read ahead on a thread: the suite's traces byte for byte as zlib inflates them, in any read sizes",
          "[files]") {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(data(""))) {
    if (entry.path().extension() == ".gz") files.push_back(entry.path().string());
  }
  REQUIRE(files.size() >= 20);
  const temp_file many_chunks(gzip(a_trace(40000)), ".json.gz");  // several MB: many chunks
  files.push_back(many_chunks.path);
  for (const std::string& path : files) {
    INFO(path);
    const std::string expected = inflated_by_zlib(file_bytes(path));
    CHECK(all_of(*detail::open_trace_file(path)) == expected);
    const auto odd = detail::open_trace_file(path);  // reads of 7 bytes, then of 3 MiB
    std::string got;
    std::vector<char> buf(3 << 20);
    for (int i = 0; i < 1000; ++i) got.append(buf.data(), odd->read(buf.data(), 7));
    while (const std::size_t n = odd->read(buf.data(), buf.size())) got.append(buf.data(), n);
    CHECK(got == expected);
  }
}

TEST_CASE("gzip read ahead: a cut-short file gives every byte before the cut, then the error; a reader may stop early",
          "[files]") {
  const std::string text = a_trace(40000), z = gzip(text);
  REQUIRE(text.size() > 8 * (std::size_t{256} << 10));
  const temp_file cut(z.substr(0, z.size() * 3 / 4), ".json.gz");
  char buf[1 << 15];
  {
    const auto source = detail::open_trace_file(cut.path, "run.json.gz");
    std::string got;
    try {
      while (const std::size_t n = source->read(buf, sizeof buf)) got.append(buf, n);
      FAIL("a cut-short gzip file read to its end");
    } catch (const std::invalid_argument& e) {
      CHECK_THAT(e.what(), Contains("run.json.gz") && Contains("truncated"));
    }
    CHECK(got.size() > text.size() / 2);
    CHECK(text.compare(0, got.size(), got) == 0);  // what came is the text's start, unchanged
  }  // closed: the next files are read ahead (one gzip file open at a time)
  const temp_file whole(z, ".json.gz");
  for (int i = 0; i < 20; ++i) {  // opened, a little read, let go while the thread reads ahead
    const auto early = detail::open_trace_file(whole.path, "run.json.gz");
    CHECK(early->read(buf, 10) == 10);
  }
}

TEST_CASE("a small gzip file is inflated on the reader's thread; a large one ahead, on a thread of its own",
          "[files]") {
  const auto threads = [] {
    const std::filesystem::directory_iterator tasks("/proc/self/task");
    return std::distance(begin(tasks), end(tasks));
  };
  const std::string small_text = a_trace(300), large_text = a_trace(40000);
  REQUIRE(small_text.size() < (std::size_t{1} << 20));
  REQUIRE(large_text.size() > (std::size_t{4} << 20));
  const temp_file small(gzip(small_text), ".json.gz"), large(gzip(large_text), ".json.gz");
  const auto before = threads();
  {
    const auto source = detail::open_trace_file(small.path);
    CHECK(threads() == before);
    CHECK(all_of(*source) == small_text);
  }
  if (detail::usable_cpus() >= 2) {
    const auto source = detail::open_trace_file(large.path);
    CHECK(threads() == before + 1);
    CHECK(all_of(*source) == large_text);
  }
}

TEST_CASE("a file's size hint: a regular file's size, a gzip file's inflated size, nothing for a pipe", "[files]") {
  const std::string text = a_trace(300);
  const temp_file plain(text, ".json");
  CHECK(detail::open_trace_file(plain.path)->size_hint() == text.size());
  const temp_file zipped(gzip(text), ".json.gz");
  const auto inflating = detail::open_trace_file(zipped.path);
  CHECK(inflating->size_hint() == text.size());
  CHECK(all_of(*inflating) == text);
  // A trace read with its room reserved from the hint, and one whose hint is short of its events
  // (a gzip file of two members: the hint is the last one's): the same events either way.
  const std::string two_members = gzip(text.substr(0, text.size() - 100)) + gzip(text.substr(text.size() - 100));
  const temp_file members(two_members, ".json.gz");
  const auto short_hint = detail::open_trace_file(members.path);
  CHECK(short_hint->size_hint() == 100);
  const detail::trace_events a = detail::read_trace_events(*detail::open_trace_file(zipped.path), "a");
  const detail::trace_events b = detail::read_trace_events(*short_hint, "b");
  REQUIRE(a.events.size() == 600);
  CHECK(b.events.size() == a.events.size());
  CHECK(b.events.back().ts == a.events.back().ts);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  REQUIRE(::write(fds[1], "[]", 2) == 2);
  ::close(fds[1]);  // written and closed: opening it reads its first bytes and never waits
  CHECK(detail::open_trace_file("/dev/fd/" + std::to_string(fds[0]))->size_hint() == 0);
  ::close(fds[0]);
}

TEST_CASE("a small file's buffers are small; a value longer than them, or a size hint far short, still reads whole",
          "[files]") {
  CHECK(detail::buffer_bytes(0) == 256u << 10);  // not known (a pipe): the full size
  CHECK(detail::buffer_bytes(1000) == 16u << 10);
  CHECK(detail::buffer_bytes(std::uint64_t{4} << 20) == 64u << 10);
  CHECK(detail::buffer_bytes(std::uint64_t{1} << 40) == 256u << 10);
  // A 40 KB name in a file of 42 KB: the scanner starts at 16 KiB and grows for it, as plain
  // JSON and through the read-ahead of a gzip file.
  trace_text t;
  const std::string long_name(40000, 'n');
  t.add("user_annotation", "ProfilerStep#0", 1, 0, 90);
  t.add("cpu_op", long_name, 1, 10, 50);
  const std::string text = t.json();
  REQUIRE(text.size() < 48000);
  const temp_file plain(text, ".json"), zipped(gzip(text), ".json.gz");
  for (const std::string& path : {plain.path, zipped.path}) {
    INFO(path);
    const detail::trace_events e = detail::read_trace_events(*detail::open_trace_file(path), "t");
    REQUIRE(e.events.size() == 2);
    CHECK(e.names[e.events[1].name] == long_name);
  }
}

TEST_CASE("each inflater gives the text back fed its input a byte at a time, whatever the header holds", "[files]") {
  const std::string text = a_trace(40);
  for (const std::string& member : {gzip(text), gzip_with_header_fields(text)}) {
    for (auto engine : {detail::inflater::engine::zlib, detail::inflater::engine::isal}) {
      if (!detail::has_engine(engine)) continue;
      INFO((engine == detail::inflater::engine::zlib ? "zlib" : "ISA-L")
           << ", member of " << member.size() << " bytes");
      const auto in = detail::make_inflater(engine);
      std::string out;
      unsigned char buf[300];
      bool ended = false;
      for (std::size_t i = 0; i < member.size() && !ended; ++i) {
        in->give(reinterpret_cast<const unsigned char*>(member.data()) + i, 1);
        while (!ended && in->avail_in() > 0) {
          std::size_t made = 0;
          const auto st = in->inflate(buf, sizeof buf, made);
          out.append(reinterpret_cast<const char*>(buf), made);
          REQUIRE((st == detail::inflater::status::more || st == detail::inflater::status::member_end));
          ended = st == detail::inflater::status::member_end;
        }
      }
      for (int k = 0; k < 100 && !ended; ++k) {  // output still held once the input is all given
        std::size_t made = 0;
        ended = in->inflate(buf, sizeof buf, made) == detail::inflater::status::member_end;
        out.append(reinterpret_cast<const char*>(buf), made);
      }
      CHECK(ended);
      CHECK(out == text);
    }
  }
}

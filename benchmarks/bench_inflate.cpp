// The gzip inflaters side by side (profiler/bytes/inflater.hpp): ISA-L's igzip against zlib, reading
// every .json.gz trace of the suite (or the files given) through the reader's own byte source,
// in paired rounds (benchmarks/paired.hpp). Process CPU is the figure (the read-ahead inflates
// on a thread of its own); wall time beside it. The engine a build uses is the faster one: this
// prints the ratio that chose it, and checks both give the same bytes.
//
//   bench_inflate [rounds] [trace.json.gz ...]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "paired.hpp"
#include "profiler/bytes/byte_source.hpp"

using steptrace::detail::inflater;

namespace {

// Every byte of `path` inflated by `engine`: their count, and a checksum of them.
std::pair<std::uint64_t, std::uint64_t> read_all(const std::string& path, inflater::engine engine) {
  const auto source = steptrace::detail::open_trace_file(path, "", steptrace::detail::max_inflated_bytes, engine);
  static std::vector<char> buf(1 << 20);
  std::uint64_t n = 0, sum = 1469598103934665603ULL;
  while (const std::size_t got = source->read(buf.data(), buf.size())) {
    n += got;
    for (std::size_t i = 0; i < got; i += 64) sum = (sum ^ static_cast<unsigned char>(buf[i])) * 1099511628211ULL;
  }
  return {n, sum};
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 9;
  std::vector<std::string> files;
  for (int i = 2; i < argc; ++i) files.emplace_back(argv[i]);
  if (files.empty()) {
    for (const auto& e : std::filesystem::directory_iterator(STEPTRACE_TRACE_DATA)) {
      if (e.path().string().size() > 8 && e.path().string().substr(e.path().string().size() - 8) == ".json.gz") {
        files.push_back(e.path().string());
      }
    }
    std::sort(files.begin(), files.end());
  }
  if (!steptrace::detail::has_engine(inflater::engine::isal)) {
    std::printf("this build has no ISA-L (libisal-dev): gzip traces are inflated by zlib\n");
    return 0;
  }
  std::uint64_t bytes = 0;
  bool same = true;
  for (const std::string& f : files) {
    const auto z = read_all(f, inflater::engine::zlib), i = read_all(f, inflater::engine::isal);
    same = same && z == i;
    bytes += z.first;
  }
  std::printf("%zu gzip traces, %.1f MB inflated; the same bytes from both: %s\n", files.size(), bytes / 1e6,
              same ? "yes" : "NO");
  paired::bench b(rounds);
  for (auto engine : {inflater::engine::zlib, inflater::engine::isal}) {
    b.add(engine == inflater::engine::zlib ? "zlib" : "ISA-L (igzip)", [&files, engine](long n) {
      for (long k = 0; k < n; ++k) {
        for (const std::string& f : files) read_all(f, engine);
      }
    });
  }
  b.run(1);
  b.print_table();
  for (paired::clock_kind c : {paired::process, paired::wall}) {
    const paired::spread s = b.ratio_of_costs("ISA-L (igzip)", "zlib", "", c);
    std::printf("  ISA-L over zlib, reading every file: %.2fx [%.2f-%.2f] by %s\n", s.median, s.low, s.high,
                paired::clock_name(c));
  }
  return same ? 0 : 1;
}

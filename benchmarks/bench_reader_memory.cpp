// The C++ twin of bench_reader_memory.py, without an interpreter's heap: the resident memory one
// read_file() of a trace adds to a fresh process, as a multiple of the file's size. The library's
// code and every other mapped page are brought in first and the peak is reset
// (/proc/self/clear_refs), so the figure is the data the read holds. A fresh process has no free
// heap to reuse, so a small trace reads higher here than under Python, whose interpreter has.
//   bench_reader_memory TRACE   (one trace a process: run it once per file)
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <steptrace/profiler_trace.hpp>
#include <string>

namespace {

long status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key) + 1);
  }
  return -1;
}

// Every readable page of every mapped file touched: the read then adds only what it allocates.
void page_in_mapped_files() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string span, perms, offset, dev, inode, path;
    in >> span >> perms >> offset >> dev >> inode >> path;
    if (perms.empty() || perms[0] != 'r' || path.empty() || path[0] != '/') continue;
    const auto dash = span.find('-');
    const unsigned long lo = std::stoul(span.substr(0, dash), nullptr, 16),
                        hi = std::stoul(span.substr(dash + 1), nullptr, 16);
    for (unsigned long page = lo; page < hi; page += 4096) (void)*reinterpret_cast<volatile const char*>(page);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bench_reader_memory TRACE\n");
    return 2;
  }
  struct stat st {};
  if (stat(argv[1], &st) != 0) {
    std::perror(argv[1]);
    return 2;
  }
  page_in_mapped_files();
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM back to VmRSS
  const long base = status_kb("VmHWM:");
  const steptrace::summary s = steptrace::read_file(argv[1]);
  const double data = static_cast<double>(status_kb("VmHWM:") - base) * 1024;
  std::printf("%s: %llu steps; data %.0f KB, %.2fx the file's %.1f MB\n", argv[1],
              static_cast<unsigned long long>(s.steps), data / 1024, data / static_cast<double>(st.st_size),
              static_cast<double>(st.st_size) / 1e6);
  return 0;
}

#include "record/cpu_load.hpp"

#include <dirent.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <string>
#include <thread>

#include "record/clock.hpp"

namespace steptrace::detail {

unsigned usable_cpus() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}
namespace {

bool read_schedstat(const std::string& path, std::uint64_t& run, std::uint64_t& wait) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return false;
  unsigned long long r = 0, w = 0;
  const bool ok = std::fscanf(f, "%llu %llu", &r, &w) == 2;
  std::fclose(f);
  run = r;
  wait = w;
  return ok;
}

template <class Fn>
void for_each_number(const std::string& dir, Fn&& fn) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* e = readdir(d)) {
    char* end = nullptr;
    const long n = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && n > 0) fn(static_cast<int>(n));
  }
  closedir(d);
}

// CPU time of every thread this process ever had, the exited ones included.
std::uint64_t process_cpu_ns() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  const auto ns = [](const timeval& t) {
    return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(t.tv_usec) * 1000ull;
  };
  return ns(u.ru_utime) + ns(u.ru_stime);
}

}  // namespace

void cpu_load::restart() noexcept {
  totals_ = cpu_totals{};
  threads_.clear();
  started_ = true;
  started_ns_ = monotonic_ns();
  baseline_ = true;  // the first read only notes where each thread stands
  sample();
  baseline_ = false;
}

void cpu_load::read_process(int pid, bool child, int depth) {
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task/";
  for_each_number(task_dir, [&](int tid) {
    std::uint64_t run = 0, wait = 0;
    if (!read_schedstat(task_dir + std::to_string(tid) + "/schedstat", run, wait)) return;
    auto [it, fresh] = threads_.try_emplace(static_cast<std::uint64_t>(tid), seen{run, wait, generation_});
    seen& s = it->second;
    if (!fresh) {
      const std::uint64_t dr = run > s.run ? run - s.run : 0, dw = wait > s.wait ? wait - s.wait : 0;
      if (child) totals_.children_run_ns += dr;
      (child ? totals_.children_wait_ns : totals_.wait_ns) += dw;
      s = seen{run, wait, generation_};
    } else if (!baseline_) {
      // A thread born since the last read: what it did so far is in this span.
      if (child) totals_.children_run_ns += run;
      (child ? totals_.children_wait_ns : totals_.wait_ns) += wait;
    }
    if (depth < 4) {  // workers of workers, not deeper
      std::FILE* f = std::fopen((task_dir + std::to_string(tid) + "/children").c_str(), "r");
      if (f == nullptr) return;
      int kid = 0;
      while (std::fscanf(f, "%d", &kid) == 1) read_process(kid, true, depth + 1);
      std::fclose(f);
    }
  });
}

void cpu_load::sample() noexcept {
  if (!started_) return;
  try {
    read_all();
  } catch (const std::exception&) {  // out of memory: these figures go without this sample
  }
}

void cpu_load::read_all() {
  ++generation_;
  const std::uint64_t cpu = process_cpu_ns();
  if (!baseline_ && cpu > process_cpu_) totals_.run_ns += cpu - process_cpu_;
  process_cpu_ = cpu;
  read_process(static_cast<int>(getpid()), false, 0);
  for (auto it = threads_.begin(); it != threads_.end();) {  // forget threads that are gone
    it = it->second.generation == generation_ ? std::next(it) : threads_.erase(it);
  }
  totals_.wall_ns = monotonic_ns() - started_ns_;
}

}  // namespace steptrace::detail

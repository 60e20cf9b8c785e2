// What one timed wake-up of a sleeping thread costs in CPU on this machine: the collector's
// price per poll (core/recording/poll_interval.hpp), which sets how many records a poll should find to be
// cheap per record. A thread waits on a condition variable with a timeout, as the collector
// does, for a second at each interval; its thread CPU over its wake-ups, with the other core idle
// and with it busy (as while a recording thread runs).
//   bench_wake
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <initializer_list>
#include <mutex>
#include <thread>

namespace {

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

void measure(int interval_us, bool busy) {
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  double cpu = 0;
  long wakes = 0;
  std::thread sleeper([&] {
    std::unique_lock<std::mutex> lock(m);
    const double start = thread_cpu_ns();
    while (!stop) {
      cv.wait_for(lock, std::chrono::microseconds(interval_us));
      ++wakes;
    }
    cpu = thread_cpu_ns() - start;
  });
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  std::atomic<unsigned long> spin{0};
  if (busy) {
    while (std::chrono::steady_clock::now() < end) spin.fetch_add(1, std::memory_order_relaxed);
  } else {
    std::this_thread::sleep_until(end);
  }
  {
    std::lock_guard<std::mutex> lock(m);
    stop = true;
  }
  cv.notify_one();
  sleeper.join();
  std::printf("  every %5d us, the other core %s: %5ld wake-ups, %6.1f us of CPU each\n", interval_us,
              busy ? "busy" : "idle", wakes, cpu / static_cast<double>(wakes) / 1e3);
}

}  // namespace

int main() {
  std::printf("a timed wake-up's CPU (a thread waiting on a condition variable with a timeout, 1 s each)\n");
  for (bool busy : {false, true}) {
    for (int us : {100, 500, 2000}) measure(us, busy);
  }
  return 0;
}

// A toy inference server: worker threads each handle requests, one step per request, with
// preprocess / compute / postprocess phases of known length. At the end it prints the
// per-phase p50/p95/p99 table to stderr and the JSON to stdout.
//
//   request_server [threads] [requests_per_thread]
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <steptrace/steptrace.hpp>
#include <thread>
#include <vector>

namespace {

void busy(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

void handle_request(int i) {
  STEPTRACE_STEP();
  {
    STEPTRACE_PHASE("preprocess");
    busy(std::chrono::microseconds(200));
  }  // parse, tokenize
  {
    STEPTRACE_PHASE("compute");
    busy(std::chrono::microseconds(i % 10 == 0 ? 3000 : 1000));
  }  // a slow tail
  {
    STEPTRACE_PHASE("postprocess");
    busy(std::chrono::microseconds(100));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  const int requests = argc > 2 ? std::atoi(argv[2]) : 200;

  steptrace::tracer& tracer = steptrace::default_tracer();
  steptrace::config cfg = tracer.options();
  cfg.print_at_exit = steptrace::exit_print::never;  // this program prints its own report below
  tracer.configure(cfg);

  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([requests] {
      for (int i = 0; i < requests; ++i) handle_request(i);
    });
  }
  for (auto& w : workers) w.join();

  const steptrace::summary s = tracer.summary();
  std::cerr << s.table();
  std::cout << s.json() << '\n';
}

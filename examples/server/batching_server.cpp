// A toy batching inference server whose requests cross three threads, the way real C++ servers
// run: an I/O thread accepts and reads, a preprocessing thread tokenises, a batch worker runs
// up to `max_batch` requests at once on the "device", and an answering thread writes each reply
// and ends the request. Every request is one steptrace::request handle, handed from thread to
// thread with the request itself; the batch worker's steps are batches (set_batch_size).
//
//   batching_server [port] [max_batch] [max_wait_us]
//
//   GET /infer    one request: its reply is "ok <queue us> <preprocess us> <inference us>", the
//                 server's own steady_clock stamps beside steptrace's (both waits are `queue`)
//   GET /metrics  Prometheus text (counts since the start, quantiles of the last minute)
//   GET /quit     stops: the table goes to stderr, the JSON to stdout
//
// It prints "listening on 127.0.0.1:PORT" once it accepts (port 0: the system picks one).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <steptrace/steptrace.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::microseconds;

const steptrace::phase_id queue_id = steptrace::register_phase("queue");  // waiting for the next stage
const steptrace::phase_id preprocess_id = steptrace::register_phase("preprocess");
const steptrace::phase_id inference_id = steptrace::register_phase("inference");
const steptrace::phase_id respond_id = steptrace::register_phase("respond");

void busy(microseconds d) {  // stands for real work: tokenising, a kernel
  const auto until = clock_type::now() + d;
  while (clock_type::now() < until) {
  }
}

// A queue between two stages; close() wakes every waiter with nothing.
template <class T>
class channel {
 public:
  void push(T v) {
    {
      std::lock_guard<std::mutex> lock(m_);
      q_.push_back(std::move(v));
    }
    cv_.notify_one();
  }
  std::optional<T> pop() { return pop_until(clock_type::time_point::max()); }
  std::optional<T> pop_until(clock_type::time_point deadline) {
    std::unique_lock<std::mutex> lock(m_);
    if (!cv_.wait_until(lock, deadline, [&] { return !q_.empty() || closed_; }) || q_.empty()) return std::nullopt;
    T v = std::move(q_.front());
    q_.pop_front();
    return v;
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(m_);
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<T> q_;
  bool closed_ = false;
};

struct job {
  int socket = -1;
  steptrace::request trace;  // the request's step, begun when it was accepted
  clock_type::time_point queued;
  long queue_us = 0, preprocess_us = 0, inference_us = 0;  // stamped beside the records, for the reply
};
using job_ptr = std::unique_ptr<job>;

long us_since(clock_type::time_point t) {
  return static_cast<long>(std::chrono::duration_cast<microseconds>(clock_type::now() - t).count());
}

void write_reply(int socket, const std::string& body) {
  const std::string reply =
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n" + body;
  for (std::size_t at = 0; at < reply.size();) {
    const ssize_t n = ::send(socket, reply.data() + at, reply.size() - at, MSG_NOSIGNAL);
    if (n <= 0) break;  // the client left: nothing to answer
    at += static_cast<std::size_t>(n);
  }
  ::close(socket);
}

std::string read_path(int socket) {  // the path of "GET /path HTTP/1.1"
  char buffer[1024];
  const ssize_t n = ::recv(socket, buffer, sizeof buffer - 1, 0);
  if (n <= 0) return {};
  const std::string head(buffer, static_cast<std::size_t>(n));
  const std::size_t from = head.find(' '), to = head.find(' ', from + 1);
  return from == std::string::npos || to == std::string::npos ? std::string() : head.substr(from + 1, to - from - 1);
}

// Preprocessing: tokenise, 300 us a request.
void preprocessor(channel<job_ptr>& in, channel<job_ptr>& out) {
  while (auto j = in.pop()) {
    (*j)->trace.end_phase(queue_id);
    (*j)->queue_us = us_since((*j)->queued);
    const auto start = clock_type::now();
    {
      steptrace::request_phase p((*j)->trace, preprocess_id);
      busy(microseconds(300));
    }
    (*j)->preprocess_us = us_since(start);
    (*j)->trace.begin_phase(queue_id);  // waiting for a batch
    (*j)->queued = clock_type::now();
    out.push(std::move(*j));
  }
  out.close();
}

// The batch worker: takes what has arrived, up to max_batch, waiting at most max_wait after
// the first; a batch costs 800 us plus 100 us a request, like a kernel that batching amortises.
void batch_worker(channel<job_ptr>& in, channel<job_ptr>& out, std::size_t max_batch, microseconds max_wait) {
  steptrace::tracer& tracer = steptrace::default_tracer();
  while (auto first = in.pop()) {
    std::vector<job_ptr> batch;
    batch.push_back(std::move(*first));
    const auto deadline = clock_type::now() + max_wait;
    while (batch.size() < max_batch) {
      auto more = in.pop_until(deadline);
      if (!more) break;
      batch.push_back(std::move(*more));
    }
    steptrace::scoped_step step(tracer);
    tracer.set_batch_size(static_cast<std::uint32_t>(batch.size()));
    const auto start = clock_type::now();
    for (job_ptr& j : batch) {
      j->trace.end_phase(queue_id);
      j->queue_us += us_since(j->queued);
      j->trace.begin_phase(inference_id);
    }
    {
      steptrace::scoped_phase run(tracer, inference_id);
      busy(microseconds(800 + 100 * static_cast<long>(batch.size())));
    }
    for (job_ptr& j : batch) {
      j->trace.end_phase(inference_id);
      j->inference_us = us_since(start);
      out.push(std::move(j));
    }
  }
  out.close();
}

// The answering thread: writes each reply and ends its request.
void answerer(channel<job_ptr>& in) {
  while (auto j = in.pop()) {
    job& r = **j;
    {
      steptrace::request_phase p(r.trace, respond_id);
      write_reply(r.socket, "ok " + std::to_string(r.queue_us) + " " + std::to_string(r.preprocess_us) + " " +
                                std::to_string(r.inference_us) + "\n");
    }
    r.trace.end();
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int port = argc > 1 ? std::atoi(argv[1]) : 8080;
  const std::size_t max_batch = argc > 2 ? static_cast<std::size_t>(std::atoi(argv[2])) : 8;
  const microseconds max_wait(argc > 3 ? std::atol(argv[3]) : 2000);

  steptrace::tracer& tracer = steptrace::default_tracer();
  steptrace::config cfg = tracer.options();
  cfg.print_at_exit = steptrace::exit_print::never;  // printed below, on /quit
  tracer.configure(cfg);

  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  const int yes = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(listener, 256) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    std::perror("batching_server: cannot listen");
    return 1;
  }
  std::cout << "listening on 127.0.0.1:" << ntohs(address.sin_port) << std::endl;

  channel<job_ptr> to_preprocess, to_batch, to_answer;
  std::thread stage1(preprocessor, std::ref(to_preprocess), std::ref(to_batch));
  std::thread stage2(batch_worker, std::ref(to_batch), std::ref(to_answer), max_batch, max_wait);
  std::thread stage3(answerer, std::ref(to_answer));

  for (;;) {  // the I/O thread: accept, read, hand on
    const int socket = ::accept(listener, nullptr, nullptr);
    if (socket < 0) continue;
    const std::string path = read_path(socket);
    if (path == "/infer") {
      auto j = std::make_unique<job>();  // the request's step begins here
      j->socket = socket;
      j->trace.begin_phase(queue_id);  // waiting for the preprocessing thread
      j->queued = clock_type::now();
      to_preprocess.push(std::move(j));
    } else if (path == "/metrics") {
      write_reply(socket, tracer.metrics().prometheus("server"));
    } else {
      write_reply(socket, path == "/quit" ? "bye\n" : "unknown path\n");
      if (path == "/quit") break;
    }
  }
  to_preprocess.close();
  stage1.join();
  stage2.join();
  stage3.join();
  ::close(listener);
  const steptrace::summary s = tracer.summary();
  std::cerr << s.table();
  std::cout << s.json() << std::endl;
}

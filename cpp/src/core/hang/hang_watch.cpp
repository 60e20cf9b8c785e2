// The hang watch (hang_watch.hpp): the look once a second, the report written without the
// tracer lock, and every Python thread's stack through the bindings' writer.
#include "core/hang/hang_watch.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <string>

#include "base/log.hpp"
#include "base/own_folder.hpp"
#include "base/quiet_write.hpp"
#include "base/whole_file.hpp"
#include "record/clock.hpp"
#include "record/names.hpp"
#include "report/json/json_fields.hpp"
#include "report/report.hpp"
#include "steptrace/hang.hpp"
#include "steptrace/phase.hpp"

namespace steptrace {
namespace {

std::atomic<stack_writer> g_stack_writer{nullptr};

constexpr double auto_floor_s = 60;                 // hang_after auto: at least this
constexpr double auto_steps = 10;                   // ... and this many p99 steps
constexpr double auto_before_steps_s = 600;         // ... and before any counted step (start-up, compiling)
constexpr std::size_t max_stack_bytes = 64 * 1024;  // a report's stacks at most
constexpr std::size_t last_steps_kept = 8;

// Every thread's stack as the writer gives it, read back from an anonymous file; bounded.
std::string read_stacks() {
  const stack_writer writer = g_stack_writer.load(std::memory_order_acquire);
  if (writer == nullptr) return {};
  int fd = ::memfd_create("steptrace-stacks", MFD_CLOEXEC);
  if (fd < 0) {
    std::FILE* f = std::tmpfile();  // an older kernel: an unnamed temporary file
    if (f == nullptr) return {};
    fd = ::dup(::fileno(f));
    std::fclose(f);
    if (fd < 0) return {};
  }
  writer(fd);
  std::string out;
  if (::lseek(fd, 0, SEEK_SET) == 0) {
    char buffer[8192];
    while (out.size() < max_stack_bytes) {
      const ssize_t n = ::read(fd, buffer, std::min(sizeof buffer, max_stack_bytes - out.size()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out.append(buffer, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  if (out.size() == max_stack_bytes) out += "\n... (cut at 64 KB)\n";
  return out;
}

}  // namespace

void set_stack_writer(stack_writer writer) noexcept { g_stack_writer.store(writer, std::memory_order_release); }

namespace detail {

double hang_watch::after_now(const hang_context& c) const {
  if (c.hang_after_s != 0) return c.hang_after_s;  // set, or -1: off
  if (c.recent == nullptr || c.recent->empty()) return auto_before_steps_s;
  const double p99_s = static_cast<double>(c.recent->length_quantile(0.99)) * host_clock::ns_per_tick() / 1e9;
  return std::max(auto_floor_s, auto_steps * p99_s);
}

hang_view hang_watch::view(const hang_context& c) const {
  hang_view v;
  const double ns_per_tick = host_clock::ns_per_tick();
  const std::uint64_t now = c.now != 0 ? c.now : host_clock::now();
  auto seconds_since = [&](std::uint64_t since, std::uint64_t less = 0) {
    const std::uint64_t ticks = now > since ? now - since : 0;
    return static_cast<double>(ticks - std::min(ticks, less)) * ns_per_tick / 1e9;
  };
  std::vector<std::pair<std::uint32_t, std::uint64_t>> phases;
  for (const step_builder* b : c.builders) {
    std::uint64_t index = 0, begin = 0, aside = 0;
    bool aside_open = false;
    if (!b->open_step(index, begin, aside, aside_open, phases)) continue;
    if (aside_open) continue;  // its time now is set aside (a checkpoint, an evaluation): not watched
    open_step_now& s = v.threads.emplace_back();
    s.thread = b->thread();
    s.step = index;
    s.open_s = seconds_since(begin, aside);
    for (const auto& [id, at] : phases) s.phases.push_back({phase_label(phase_id{id}), seconds_since(at)});
  }
  std::sort(v.threads.begin(), v.threads.end(),
            [](const open_step_now& a, const open_step_now& b) { return a.open_s > b.open_s; });
  v.hang_after_s = after_now(c);
  v.suspected = v.hang_after_s > 0 && !v.threads.empty() && v.threads.front().open_s >= v.hang_after_s;
  v.collectives = last_collectives();
  if (reported_) v.report = report_;
  return v;
}

bool hang_watch::due() {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_check_ < std::chrono::seconds(1)) return false;
  last_check_ = now;
  return true;
}

void hang_watch::tick(std::unique_lock<std::mutex>& lock, const hang_context& c) {
  if (c.hang_after_s < 0) return;
  hang_view v = view(c);
  if (reported_) {  // the job moved once the stuck step is no longer open on its thread
    const bool still = std::any_of(v.threads.begin(), v.threads.end(),
                                   [&](const open_step_now& s) { return s.thread == thread_ && s.step == step_; });
    if (still) return;
    reported_ = false;
    report_.clear();
  }
  if (!v.suspected) return;
  reported_ = true;
  thread_ = v.threads.front().thread;
  step_ = v.threads.front().step;
  ++reports_;
  if (c.recent != nullptr) {
    for (std::uint64_t ticks : c.recent->last_lengths(last_steps_kept)) {
      v.last_steps_ms.push_back(static_cast<double>(ticks) * host_clock::ns_per_tick() / 1e6);
    }
  }
  const std::string folder = c.capture_dir.empty() ? "." : c.capture_dir;
  const std::string jsonl = rank_path(c.jsonl_path, c.rank ? c.rank->rank : 0);
  const std::optional<rank_info> who = c.rank;
  lock.unlock();  // the stacks, the file and the lines without the tracer lock
  std::string path;
  try {
    const std::string stacks = read_stacks();
    const std::string stem = safe_name(program_invocation_short_name ? program_invocation_short_name : "run") +
                             "-rank" + std::to_string(who ? who->rank : 0) + "-hang-step" +
                             std::to_string(v.threads.front().step) + "-pid" + std::to_string(::getpid());
    try {
      const own_folder dir(folder);  // only a folder of this user's, held open while written
      path = dir.write_new(stem, ".txt", [&](const std::string& named) {
        v.report = named;
        return hang_report_text(v, who, stacks, {});
      });
    } catch (const std::exception& e) {
      log(log_level::error, std::string("the hang report is not written: ") + e.what());
      v.report.clear();
      path.clear();
    }
    publish(lock, v, path);  // view() names the file as soon as it is there
    write_stderr(hang_lines(v, who));
    if (!jsonl.empty()) {  // the live JSONL gets it as a line of its own: {"hang": {...}}
      json_doc body = hang_json(v);
      if (who) body["rank"] = who->rank;
      body["stacks"] = stacks;
      const json_doc line = {{"hang", body}};
      append_whole_line(jsonl, line.dump(-1, ' ', false, json_doc::error_handler_t::replace) + "\n");
    }
  } catch (const std::exception& e) {
    log(log_level::error, std::string("hang report: ") + e.what());
  }
  lock.lock();
}

void hang_watch::publish(std::unique_lock<std::mutex>& lock, const hang_view& v, const std::string& path) {
  lock.lock();  // still the hang it was written for: the job may have moved meanwhile
  if (reported_ && thread_ == v.threads.front().thread && step_ == v.threads.front().step) report_ = path;
  lock.unlock();
}

}  // namespace detail
}  // namespace steptrace

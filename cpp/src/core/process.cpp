// Process-wide things: the default tracer and its report at exit (table and JSON file), the
// once-only nested-step message, the usable core count, the GPU library search path.
#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>

#include "base/log.hpp"
#include "base/output_path.hpp"
#include "base/own_folder.hpp"
#include "base/quiet_write.hpp"
#include "base/whole_file.hpp"
#include "core/tracer_impl.hpp"
#include "gpu/backend.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "steptrace/tracer.hpp"

namespace steptrace {
namespace detail {}  // namespace detail

void write_file(const std::string& path, std::string_view text) { detail::write_whole_file(path, text); }

void append_line(const std::string& path, std::string_view line) {
  std::string why;
  if (const int code = detail::append_whole_line(path, line, &why); code != 0) {
    if (why != std::strerror(code)) throw detail::refused_output(path, why);  // a planted link or file
    throw std::system_error(code, std::generic_category(), path);
  }
}

std::string write_report(const std::string& folder, const std::string& name, std::string_view text, bool fresh) {
  const detail::own_folder dir(folder);
  if (!fresh) return dir.write(name, text);
  const std::size_t dot = name.rfind('.');  // "x-pid7.pkl": the counter goes before the extension
  const std::string stem = dot == std::string::npos ? name : name.substr(0, dot);
  const std::string suffix = dot == std::string::npos ? std::string() : name.substr(dot);
  return dir.write_new(stem, suffix, [&](const std::string&) { return std::string(text); });
}

int open_report_folder(const std::string& folder) {
  const detail::own_folder dir(folder);
  const int fd = ::fcntl(dir.descriptor(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), folder);
  return fd;
}

std::string tracer::exit_report() {
  const std::optional<exit_state> end = exit_summary();
  return end ? exit_write(*end, end->own, end->seen) : std::string();
}

std::optional<tracer::exit_state> tracer::exit_summary() {
  if (impl_->forked.load() || impl_->creator_pid != getpid()) return std::nullopt;  // before any lock
  try {
    std::uint64_t shown;
    {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      if (impl_->exit_reported) return std::nullopt;
      impl_->exit_reported = true;
      shown = impl_->stats.shown_steps;
    }
    end_live();  // the run's last window, before the table
    exit_state end;
    end.own = collect_summary(false);
    end.recorded = end.own.steps + end.own.warmup_steps + end.own.failed_steps;
    end.seen = end.recorded != 0 && shown == end.recorded;
    end.open = open_steps();
    if (end.open != 0) {
      detail::log(detail::log_level::warn,
                  fmt::format("{} still open at exit (entered, never left): not counted; end each step before the "
                              "program ends (`with steptrace.step():`, or a scoped_step that leaves its scope)",
                              end.open == 1 ? std::string("a step was") : std::to_string(end.open) + " steps were"));
    }
    return end;
  } catch (const std::exception& e) {  // never turn a clean exit into a crash
    detail::log(detail::log_level::error, std::string("no report at exit: ") + e.what());
  }
  return std::nullopt;
}

std::string tracer::exit_write(const exit_state& end, const ::steptrace::summary& s, bool seen) {
  try {
    const config cfg = options();
    if (end.recorded == 0 && end.open != 0 && cfg.print_at_exit == exit_print::always && !end.own.rank) {
      return end.own.table();  // the table says what was (not) counted
    }
    if (!end.to_finish()) return {};
    if (s.steps + s.warmup_steps + s.failed_steps == 0 && !s.ranks) return {};  // nothing to say
    if (const std::string path = s.path_for(cfg.json_path); !path.empty()) {
      try {
        detail::write_whole_file(path, s.json() + "\n");
      } catch (const std::exception& e) {
        detail::log(detail::log_level::error, std::string("could not write the summary JSON: ") + e.what());
      }
    }
    if (const std::string path = s.path_for(cfg.trace_path); !path.empty()) {
      try {
        detail::write_whole_file(path, s.trace() + "\n");
      } catch (const std::exception& e) {
        detail::log(detail::log_level::error, std::string("could not write the trace: ") + e.what());
      }
    }
    if (s.rank && s.rank->rank != 0) return {};  // rank 0 prints the job's table
    switch (cfg.print_at_exit) {
      case exit_print::never:
        return {};
      case exit_print::always:
        return s.table();
      case exit_print::auto_:
        if (!seen) return s.table();
        return "steptrace: summary already shown (" + std::to_string(end.recorded) +
               " steps); STEPTRACE_PRINT_AT_EXIT=always prints it at exit too\n";
    }
  } catch (const std::exception& e) {  // never turn a clean exit into a crash
    detail::log(detail::log_level::error, std::string("no report at exit: ") + e.what());
  }
  return {};
}

std::uint64_t tracer::open_steps() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->rec.drain_all();
  return impl_->rec.open_steps();
}

void tracer::warn_nested_step() const noexcept {
  if (!impl_->nested_reported.exchange(true)) {
    detail::log(detail::log_level::error,
                "a step was opened on a thread that already has one open; steps do not nest (make the inner "
                "one a phase). The inner step is ignored; further cases are only counted.");
  }
}

long suggested_loader_workers() noexcept { return detail::suggested_workers(static_cast<long>(detail::usable_cpus())); }

void set_gpu_library_dirs(std::vector<std::string> dirs) { detail::set_gpu_library_dirs(std::move(dirs)); }
void yield_cupti(const std::string& holder) noexcept { detail::yield_cupti(holder); }
void reclaim_cupti() noexcept { detail::reclaim_cupti(); }
std::string cupti_holder() { return detail::cupti_holder(); }

tracer& default_tracer() {
  static tracer* t = [] {
    std::vector<std::string> errors;
    const config cfg = config::from_env(&errors);
    auto* made = new tracer(cfg);  // never destroyed: steps may still end during exit
    for (const auto& e : errors) detail::log(detail::log_level::error, e);
    std::atexit([] {
      const std::string text = default_tracer().exit_report();
      if (!text.empty()) detail::write_stderr(text);  // a reader that has gone raises no SIGPIPE
    });
    return made;
  }();
  return *t;
}

}  // namespace steptrace

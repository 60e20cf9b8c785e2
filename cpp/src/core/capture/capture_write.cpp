// A capture's files (the forward and the retroactive capture's one writer): its diagnosis, its
// Chrome trace in capture_dir, its block on stderr and its line in the live JSONL, all without the
// tracer lock. See cpp/src/core/README.md, "Capture on trouble".
#include <unistd.h>

#include <chrono>
#include <exception>
#include <mutex>
#include <string>

#include "base/log.hpp"
#include "base/own_folder.hpp"
#include "base/quiet_write.hpp"
#include "base/whole_file.hpp"
#include "core/capture/capturer.hpp"
#include "report/json/json_fields.hpp"
#include "report/report.hpp"

extern char* program_invocation_short_name;  // glibc

namespace steptrace::detail {

bool capturer::write(std::unique_lock<std::mutex>& lock, capture_context& c, capture_record& record, summary& s,
                     const std::string& name, std::chrono::steady_clock::time_point started) {
  const config& cfg = c.options();
  const std::string folder = cfg.capture_dir.empty() ? "." : cfg.capture_dir;
  const std::string jsonl = rank_path(cfg.jsonl_path, c.rank() ? c.rank()->rank : 0);
  std::string program;  // the run's name as the program gave it (Python: its script's), else the process's
  for (const auto& [key, value] : c.facts()) {
    if (key == "run.program") program = value;
  }
  writing_ = true;
  lock.unlock();  // the diagnosis, the trace and the files without the tracer lock
  try {
    c.finish(s);
    record.label = s.diag.label;
    record.evidence = s.diag.evidence;
    record.advice = s.diag.advice.empty() ? "" : s.diag.advice.front();
    const std::string stem =
        safe_name(program.empty() ? program_invocation_short_name ? program_invocation_short_name : "run" : program) +
        "-rank" + std::to_string(record.rank) + "-" + name + "-pid" + std::to_string(::getpid());
    record.path = folder + "/" + stem + ".trace.json";  // unique to the process: runs may share a folder
    // only a folder of this user's; a second capture tripped by the same step keeps the first
    const std::string trace = s.trace();
    record.path = own_folder(folder).write_new(stem, ".trace.json", [&](const std::string&) { return trace; });
    record.cost_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    write_stderr(capture_block(record));
    if (!jsonl.empty()) {  // the live JSONL gets it as a line of its own: {"capture": {...}}
      const json_doc line = {{"capture", captures_json({record}).at(0)}};
      append_whole_line(jsonl, line.dump(-1, ' ', false, json_doc::error_handler_t::replace) + "\n");
    }
  } catch (const std::exception& e) {
    log(log_level::error, "capture of steps " + std::to_string(record.first_step) + "-" +
                              std::to_string(record.last_step) + " (" + record.reason + ") failed: " +
                              (record.path.empty() ? "" : "could not write " + record.path + ": ") + e.what());
    lock.lock();
    writing_ = false;
    return false;
  }
  lock.lock();
  writing_ = false;
  done_.push_back(record);
  return true;
}

}  // namespace steptrace::detail

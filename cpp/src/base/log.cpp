#include "base/log.hpp"

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "base/quiet_write.hpp"
#include "base/utf8.hpp"

namespace steptrace::detail {
namespace {

// stderr, written so that a reader that has gone never raises SIGPIPE (base/quiet_write.hpp).
class quiet_stderr_sink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t text;
    formatter_->format(msg, text);
    write_stderr(std::string_view(text.data(), text.size()));
  }
  void flush_() override {}
};

spdlog::logger& logger() {
  // Never destroyed: messages may come from exit handlers.
  static auto* l = [] {
    auto* made = new spdlog::logger("steptrace", std::make_shared<quiet_stderr_sink>());
    made->set_pattern("steptrace %l: %v");
    made->set_level(spdlog::level::warn);
    return made;
  }();
  return *l;
}

spdlog::level::level_enum to_spdlog(log_level level) {
  switch (level) {
    case log_level::trace:
      return spdlog::level::trace;
    case log_level::debug:
      return spdlog::level::debug;
    case log_level::info:
      return spdlog::level::info;
    case log_level::warn:
      return spdlog::level::warn;
    case log_level::error:
      return spdlog::level::err;
    case log_level::off:
      return spdlog::level::off;
  }
  return spdlog::level::warn;
}

}  // namespace

log_level parse_log_level(std::string_view name) {
  static constexpr std::pair<std::string_view, log_level> names[] = {
      {"trace", log_level::trace},  {"debug", log_level::debug}, {"info", log_level::info}, {"warn", log_level::warn},
      {"warning", log_level::warn}, {"error", log_level::error}, {"off", log_level::off}};
  for (const auto& [text, level] : names) {
    if (name == text) return level;
  }
  throw std::invalid_argument("expected one of trace, debug, info, warn, error, off");
}

void set_log_level(log_level level) { logger().set_level(to_spdlog(level)); }

// Every message is one printable line: a path or value in it (an environment variable, a file
// name) never reaches the terminal as an escape sequence (base/utf8.hpp, the one rule).
void log(log_level level, std::string_view message) { logger().log(to_spdlog(level), "{}", escaped_controls(message)); }

}  // namespace steptrace::detail

// read_file(): a saved summary or a torch.profiler trace, told apart by the document's top-level
// keys however far into the file they come, read in one pass from a file or a pipe (never copied
// whole). cpp/src/profiler/README.md, "Reading torch.profiler traces".
#include <stdexcept>
#include <string>

#include "base/utf8.hpp"
#include "profiler/bytes/byte_source.hpp"
#include "profiler/bytes/json_scanner.hpp"
#include "profiler/trace_events.hpp"
#include "profiler/trace_rules.hpp"
#include "profiler/trace_summary.hpp"
#include "report/report.hpp"
#include "steptrace/profiler_trace.hpp"

namespace steptrace {
namespace detail {
namespace {

constexpr std::size_t max_summary_bytes = std::size_t{256} << 20;  // a 1,024-step timeline is ~18 MB

// Hands on the bytes of `source` and keeps a copy of each, up to max_summary_bytes: what was
// read while deciding is given back in front of the rest for the reader that follows.
class keeping_source final : public byte_source {
 public:
  explicit keeping_source(byte_source& source, const std::string& name) : source_(source), name_(name) {}
  std::size_t read(char* buf, std::size_t n) override {
    std::size_t got = 0;
    try {
      got = source_.read(buf, n);
    } catch (...) {
      failed_ = true;  // the file itself (a damaged gzip stream), not its JSON: never a summary's error
      throw;
    }
    if (kept_.size() + got > max_summary_bytes) {
      throw std::invalid_argument(
          name_ + ": more than " + std::to_string(max_summary_bytes >> 20) +
          " MB before its traceEvents (or its end): neither a trace steptrace reads nor a summary");
    }
    kept_.append(buf, got);
    return got;
  }
  bool compressed() const override { return source_.compressed(); }
  std::uint64_t size_hint() const override { return source_.size_hint(); }
  std::string& kept() { return kept_; }
  bool failed() const { return failed_; }

 private:
  bool failed_ = false;
  byte_source& source_;
  const std::string& name_;
  std::string kept_;
};

enum class kind { trace, listed_events, summary, execution_trace };

// By the top-level keys: "traceEvents" (or a bare array, if it lists events) is a trace, "schema" a summary, the
// first of them met deciding. A document with neither, or that is not JSON, goes to the summary
// reader, which names what is wrong in its own words; one with a Kineto key (schemaVersion,
// deviceProperties) to the trace reader, which says it lacks traceEvents. A "schema" not
// steptrace's followed by "nodes" is PyTorch's execution trace (ExecutionTraceObserver), which
// users keep beside the profiler's trace and mistake for it: said so, by name.
kind decide(keeping_source& source, const std::string& name) {
  json_scanner probe(source, name);
  try {
    const auto first = probe.peek();
    if (first == json_scanner::kind::array) return kind::listed_events;  // a trace, if its events are
    if (first != json_scanner::kind::object) return kind::summary;
    probe.enter_object();
    bool kineto = false, foreign_schema = false;
    std::string_view key;
    while (probe.next_key(key)) {
      if (key == "traceEvents") return kind::trace;
      if (key == "schema") {
        if (probe.peek() != json_scanner::kind::string || probe.read_string().substr(0, 10) == "steptrace.") {
          return kind::summary;
        }
        foreign_schema = true;  // the summary reader names it unless "nodes" follow
        continue;
      }
      if (key == "nodes" && foreign_schema) return kind::execution_trace;
      kineto = kineto || key == "schemaVersion" || key == "deviceProperties" || key == "distributedInfo";
      probe.skip_value();  // what is kept stays under max_summary_bytes (keeping_source)
    }
    return kineto && !foreign_schema ? kind::trace : kind::summary;
  } catch (const std::invalid_argument&) {
    if (source.failed()) throw;  // the bytes could not be read: that is the error
    return kind::summary;        // not JSON: the summary reader says where, in steptrace's words
  }
}

summary read_summary_text(byte_source& source, std::string text, const std::string& name,
                          const trace_options& options) {
  char chunk[1 << 16];
  while (const std::size_t got = source.read(chunk, sizeof chunk)) {
    if (text.size() + got > max_summary_bytes) {
      throw std::invalid_argument(name + ": larger than any steptrace summary (" +
                                  std::to_string(max_summary_bytes >> 20) +
                                  " MB at most), and not a trace (no traceEvents)");
    }
    text.append(chunk, got);
  }
  if (text.empty()) {
    throw std::invalid_argument(
        name + (source.compressed() ? ": a gzip file of nothing (empty once decompressed)" : ": the file is empty"));
  }
  if (!options.step.empty()) {
    throw std::invalid_argument(name + ": --step " + escaped_utf8(options.step).substr(0, 80) +
                                " names a range of a torch.profiler trace, and this is a summary");
  }
  if (const std::size_t bad = first_invalid_utf8(text); bad != std::string::npos) {
    throw std::invalid_argument(name + ": not a steptrace summary: not UTF-8 text (byte " + std::to_string(bad) + ")");
  }
  try {
    return summary::from_json(text);
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    if (what.rfind("steptrace: ", 0) == 0) what.erase(0, 11);
    if (what == "not a steptrace summary: no \"schema\" field") {  // another program's JSON object
      throw other_file_kind(name +
                            ": a JSON object with neither \"schema\" nor \"traceEvents\": neither a steptrace "
                            "summary nor a torch.profiler trace");
    }
    throw std::invalid_argument(name + ": " + what);
  }
}

}  // namespace
}  // namespace detail

namespace {

summary read_any(const std::string& path, const trace_options& options) {
  using namespace detail;
  const std::string& name = options.name.empty() ? path : options.name;
  std::unique_ptr<byte_source> source = open_trace_file(path, name);
  keeping_source keeping(*source, name);
  const kind k = decide(keeping, name);
  std::string head = std::move(keeping.kept());
  if (k == kind::execution_trace) {
    throw other_file_kind(name +
                          ": a PyTorch execution trace (ExecutionTraceObserver's \"nodes\"), not the "
                          "profiler's trace: steptrace reads the torch.profiler trace, the JSON with "
                          "\"traceEvents\" (export_chrome_trace, tensorboard_trace_handler)");
  }
  if (k == kind::summary) return read_summary_text(*source, std::move(head), name, options);
  trace_events about;
  try {
    return summarise_trace(
        about, read_trace_reading(prefixed(std::move(head), std::move(source)), name, options.step, about), name);
  } catch (const std::invalid_argument&) {
    // A list of no trace events: another program's JSON (a test's own truth beside the traces),
    // which a job's folder leaves out as it does an execution trace.
    if (k == kind::listed_events && about.events.empty() && about.skipped_events == 0) {
      throw other_file_kind(name +
                            ": a JSON list of no trace events (none with \"ph\" and \"ts\"): neither a "
                            "torch.profiler trace nor a steptrace summary");
    }
    throw;
  }
}

// The facts the reader was given, where the summary has none of its own; the diagnosis again.
summary with_facts(summary s, const trace_options& options) {
  if (options.facts.empty()) return s;
  for (const auto& [key, value] : options.facts) {
    if (s.fact(key) == nullptr) s.facts.emplace_back(key, value);
  }
  detail::complete(s);
  return s;
}

}  // namespace

summary read_file(const std::string& path, const trace_options& options) {
  return with_facts(read_any(path, options), options);
}

}  // namespace steptrace

// Internal (not public API): the events of a torch.profiler (Kineto) Chrome trace that the
// reader uses, decoded from JSON into compact records: complete ('X') events of the host ops,
// runtime calls and device activity, with the trace's facts (GPU names, rank). Every other
// event, field and category is skipped unread (cpp/src/profiler/README.md, "Reading torch.profiler
// traces").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "profiler/bytes/byte_source.hpp"
#include "profiler/op_cost.hpp"

namespace steptrace::detail {

enum class event_cat : std::uint8_t {
  op,               // cpu_op, Operator (2021)
  user_annotation,  // record_function ranges
  runtime,          // cuda_runtime, cuda_driver, Runtime (2021)
  kernel,
  memcpy,
  memset,
};

// Where a device activity ran and what it moved (its args), kept beside the events: one entry
// for a run of activities that share them (a stream's kernels), 0 for none.
struct activity_args {
  std::uint32_t device = 0, context = 0, stream = 0;
  std::uint64_t bytes = 0;
  // A collective kernel's (newer traces): its process group ("Process Group Name", in
  // trace_events::names; 0: none) and the group's call number ("Seq"; no_seq: none).
  std::uint32_t group = 0;
  std::uint64_t seq = no_seq;
  static constexpr std::uint64_t no_seq = UINT64_MAX;
};

// 40 bytes: a trace's memory is mostly its events (cpp/src/profiler/README.md, "Reading torch.profiler
// traces").
struct trace_event {
  std::uint64_t ts = 0, dur = 0;  // ns, exact (the trace writes microseconds as decimal text)
  std::uint64_t correlation = 0;  // 0: none
  std::uint32_t name = 0;         // in trace_events::names
  std::uint32_t pid = 0;          // in trace_events::ids
  union {
    std::uint32_t tid = 0;  // a host event's thread, in trace_events::ids
    std::uint32_t args;     // a device activity's (kernel, memcpy, memset), in trace_events::args
  };
  event_cat cat = event_cat::op;
  bool tid_negative = false;  // Kineto's pseudo-threads (runtime pollers)
};
static_assert(sizeof(trace_event) == 40, "a trace's events stay 40 bytes");

inline bool is_device_work(event_cat c) {
  return c == event_cat::kernel || c == event_cat::memcpy || c == event_cat::memset;
}

// The most events a trace may hold for the reader to keep (ops, ranges, runtime calls, device
// activity; other events are skipped unkept): what is kept is 40 bytes an event (64 for a device
// activity with args of its own), so this bounds a trace's memory near 640 MB whatever the file.
// A profile of a few steps holds far fewer.
inline constexpr std::size_t max_trace_events = 10'000'000;

struct trace_events {
  std::vector<trace_event> events;     // in file order
  std::vector<std::string> names;      // event names, interned
  std::vector<std::string> ids;        // pid and tid values as written (number or string), interned
  std::vector<activity_args> args{1};  // by trace_event::args; entry 0: none
  // The ops whose recorded shapes (or `flops` arg) give a cost (profiler/op_cost.hpp), by event
  // index in file order: an op traced without record_shapes has none.
  struct costed_op {
    std::uint32_t event;
    op_cost cost;
  };
  std::vector<costed_op> op_costs;
  std::vector<std::string> gpu_names;             // deviceProperties, by position
  std::optional<std::uint32_t> rank, world_size;  // distributedInfo
  std::string distributed_backend;
  std::string host;  // host_name (newer traces), cut to 255 bytes; "" when absent
  const activity_args& args_of(const trace_event& e) const { return args[e.args]; }  // device work only
  // Records of an accelerator the reader does not read (Meta's MTIA: categories `mtia_*`), counted
  // so that a trace of one is not taken for a CPU job's.
  std::uint64_t mtia_records = 0;
  // Events of steptrace's own timeline (summary::trace(): a capture without torch, trace_path),
  // read as its annotations (trace_events.cpp).
  std::uint64_t own_timeline_events = 0;
  std::uint64_t skipped_events = 0;   // events with a bad field, left out (see `problems`)
  std::vector<std::string> problems;  // the first few, for the message
};

// Reads a whole trace. Throws std::invalid_argument naming `name` when the text is not JSON,
// not a Chrome trace (no traceEvents), or is cut short.
// `event_limit`: max_trace_events, or less (tests).
trace_events read_trace_events(byte_source& source, const std::string& name,
                               std::size_t event_limit = max_trace_events);

// "1623142623460172", "1712345678901234.567", "1.5e3": microseconds as decimal text, to integer
// nanoseconds without going through a double. False for text that is not a finite, non-negative
// number that fits.
bool parse_us_as_ns(std::string_view text, std::uint64_t& ns);
// A non-negative decimal integer of at most 19 digits ("25738"); false for anything else
// (trace_numbers.cpp, with parse_us_as_ns).
bool parse_uint_text(std::string_view text, std::uint64_t& out);

}  // namespace steptrace::detail

#include "profiler/trace_events.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

#include "profiler/bytes/json_scanner.hpp"
#include "profiler/op_args.hpp"
#include "profiler/trace_names.hpp"

namespace steptrace::detail {

namespace {

// The JSON bytes an event is assumed to take when reserving room for a file's events: fewer than
// a profiler's take (Kineto writes 150 to 400 with their args), so the room is rarely short; a
// trace of shorter events grows the vector past it.
constexpr std::uint64_t min_event_bytes = 96;
// The highest device id a trace's deviceProperties is read at; a larger one is taken by position.
constexpr std::uint64_t max_listed_devices = 1024;

class interner {
 public:
  explicit interner(std::vector<std::string>& table) : table_(table) {}
  std::uint32_t operator()(std::string_view s) {
    key_.assign(s.data(), s.size());  // reused: no allocation per lookup
    const auto it = index_.find(key_);
    if (it != index_.end()) return it->second;
    const auto id = static_cast<std::uint32_t>(table_.size());
    table_.emplace_back(s);
    index_.emplace(table_.back(), id);
    return id;
  }

 private:
  std::vector<std::string>& table_;
  std::unordered_map<std::string, std::uint32_t> index_;
  std::string key_;
};

// steptrace's own timeline (summary::trace(), a capture without torch, trace_path): its steps and
// phases read as steptrace's annotations are in a torch.profiler trace (`steptrace:step`,
// `steptrace:<phase>`), its device slices as kernels on their stream (cpp/src/profiler/README.md,
// "Reading torch.profiler traces").
enum class own_kind : std::uint8_t { none, step, phase, device };
own_kind own_category(std::string_view cat) {
  if (cat == "step" || cat == "step,slowest") return own_kind::step;
  if (cat == "phase") return own_kind::phase;
  if (cat == "device" || cat == "device,collective") return own_kind::device;
  return own_kind::none;
}

// The category of an event, or false for one the reader does not use.
bool category_of(std::string_view cat, event_cat& out) {
  struct entry {
    const char* name;
    event_cat cat;
  };
  static const entry table[] = {
      {"cpu_op", event_cat::op},
      {"Operator", event_cat::op},
      {"user_annotation", event_cat::user_annotation},
      {"cuda_runtime", event_cat::runtime},
      {"cuda_driver", event_cat::runtime},
      {"Runtime", event_cat::runtime},
      {"kernel", event_cat::kernel},
      {"Kernel", event_cat::kernel},
      {"gpu_memcpy", event_cat::memcpy},
      {"Memcpy", event_cat::memcpy},
      {"gpu_memset", event_cat::memset},
      {"Memset", event_cat::memset},
  };
  for (const entry& e : table) {
    if (cat == e.name) {
      out = e.cat;
      return true;
    }
  }
  return false;
}

class event_reader {
 public:
  event_reader(json_scanner& in, trace_events& out, std::size_t limit, const std::string& name)
      : in_(in), out_(out), names_(out.names), ids_(out.ids), limit_(limit), name_(name) {}

  void read_events() {
    in_.enter_array();
    while (in_.next_element()) {
      if (in_.peek() != json_scanner::kind::object) {
        in_.skip_value();
        continue;
      }
      read_event();
    }
  }

  void read_device_properties() {
    if (in_.peek() != json_scanner::kind::array) return in_.skip_value();
    in_.enter_array();
    while (in_.next_element()) {
      if (in_.peek() != json_scanner::kind::object) {
        in_.skip_value();
        continue;
      }
      in_.enter_object();
      std::string name;
      std::uint64_t id = UINT64_MAX;
      std::string_view key;
      while (in_.next_key(key)) {
        if (key == "name" && in_.peek() == json_scanner::kind::string) {
          name = std::string(in_.read_string());
        } else if (key == "id" && in_.peek() == json_scanner::kind::number) {
          std::string_view text;
          bool was_string = false;
          if (!in_.read_scalar(text, was_string) || !parse_uint_text(text, id)) id = UINT64_MAX;
        } else {
          in_.skip_value();
        }
      }
      // By its id where it has one (a device's index in the process), else by position.
      const std::size_t at = id < max_listed_devices ? static_cast<std::size_t>(id) : out_.gpu_names.size();
      if (out_.gpu_names.size() <= at) out_.gpu_names.resize(at + 1);
      out_.gpu_names[at] = name;
    }
  }

  void read_distributed_info() {
    if (in_.peek() != json_scanner::kind::object) return in_.skip_value();
    in_.enter_object();
    std::string_view key;
    while (in_.next_key(key)) {
      const bool rank = key == "rank", world = key == "world_size", backend = key == "backend";
      std::string_view text;
      bool was_string = false;
      if (!(rank || world || backend) || !in_.read_scalar(text, was_string)) {
        if (!(rank || world || backend)) in_.skip_value();
        continue;
      }
      std::uint64_t v = 0;
      if (backend && was_string) out_.distributed_backend = std::string(text);
      if ((rank || world) && parse_uint_text(text, v) && v < UINT32_MAX) {
        (rank ? out_.rank : out_.world_size) = static_cast<std::uint32_t>(v);
      }
    }
  }

 private:
  void problem(const std::string& what) {
    ++out_.skipped_events;
    if (out_.problems.size() < 3) out_.problems.push_back(what);
  }

  // An id as written: numbers and strings alike ("25738", 25738 and "stream 7").
  std::uint32_t read_id(bool& negative) {
    std::string_view text;
    bool was_string = false;
    negative = false;
    if (!in_.read_scalar(text, was_string)) return ids_("");
    if (!text.empty() && text[0] == '-') negative = text.size() > 1 && text[1] >= '0' && text[1] <= '9';
    return ids_(text);
  }

  void read_args(trace_event& e, activity_args& where) {
    if (in_.peek() != json_scanner::kind::object) return in_.skip_value();
    in_.enter_object();
    std::string_view key;
    while (in_.next_key(key)) {
      std::uint64_t* field = nullptr;
      std::uint32_t* small = nullptr;
      if (key == "correlation") {
        field = &e.correlation;
      } else if (key == "bytes") {
        field = &where.bytes;
      } else if (key == "device") {
        small = &where.device;
      } else if (key == "context") {
        small = &where.context;
      } else if (key == "stream") {
        small = &where.stream;
      } else if (key == "Seq" || key == "seq" || key == "seq_num") {
        field = &where.seq;
      } else if (shapes_wanted(e) && read_op_arg(in_, key, inputs_)) {
        continue;
      } else if (key == "Process Group Name") {
        std::string_view text;
        bool was_string = false;
        if (in_.read_scalar(text, was_string)) where.group = names_(text.substr(0, 255));
        continue;
      }
      if (field == nullptr && small == nullptr) {
        in_.skip_value();
        continue;
      }
      std::string_view text;
      bool was_string = false;
      std::uint64_t v = 0;
      if (in_.read_scalar(text, was_string) && !was_string && parse_uint_text(text, v)) {
        if (field) *field = v;
        if (small && v <= UINT32_MAX) *small = static_cast<std::uint32_t>(v);
      }
    }
  }

  // An event of steptrace's own timeline, renamed as its annotations are named; a device slice on
  // the stream its track encodes (context * 65536 + stream), its process the device's.
  void own_event(trace_event& e, activity_args& where, own_kind own) {
    if (own == own_kind::step) {
      e.name = names_(own_step_name);
    } else if (own == own_kind::phase) {
      own_name_.assign(annotation_prefix);
      own_name_ += names_table()[e.name];
      e.name = names_(own_name_);
    } else {
      std::uint64_t track = 0;
      if (parse_uint_text(ids_table()[e.tid], track)) {
        where.context = static_cast<std::uint32_t>(track / 65536);
        where.stream = static_cast<std::uint32_t>(track % 65536);
      }
    }
  }

  // An op whose name the costing knows (profiler/op_cost.hpp) keeps its recorded inputs.
  bool shapes_wanted(const trace_event& e) {
    if (e.cat != event_cat::op) return false;
    if (costable_.size() <= e.name) costable_.resize(names_table().size() + 1, -1);
    signed char& c = costable_[e.name];
    if (c < 0) c = costed_op_name(names_table()[e.name]) ? 1 : 0;
    return c == 1;
  }

  // A device activity's args: the last entry again when they are its (a stream's kernels in a row).
  std::uint32_t args_index(const activity_args& a) {
    const activity_args& last = out_.args.back();
    if (out_.args.size() > 1 && last.device == a.device && last.context == a.context && last.stream == a.stream &&
        last.bytes == a.bytes && last.group == a.group && last.seq == a.seq) {
      return static_cast<std::uint32_t>(out_.args.size() - 1);
    }
    out_.args.push_back(a);
    return static_cast<std::uint32_t>(out_.args.size() - 1);
  }

  void read_event() {
    in_.enter_object();
    trace_event e;
    activity_args where;
    bool complete = false, used = false, ts_ok = false, dur_ok = false;
    own_kind own = own_kind::none;
    bad_ts_.clear();
    bad_dur_.clear();
    inputs_.clear();
    std::string_view key;
    while (in_.next_key(key)) {
      const char k0 = key.empty() ? '\0' : key[0];
      if (k0 == 'p' && key == "ph") {
        complete = in_.peek() == json_scanner::kind::string && in_.read_string() == "X";
        if (!complete) return in_.skip_object_rest();  // flow, instant and metadata events
      } else if (k0 == 'c' && key == "cat") {
        const std::string_view cat = in_.peek() == json_scanner::kind::string ? in_.read_string() : std::string_view();
        used = category_of(cat, e.cat);
        if (!used && (own = own_category(cat)) != own_kind::none) {
          used = true;
          e.cat = own == own_kind::device ? event_cat::kernel : event_cat::user_annotation;
        }
        if (!used && cat.substr(0, 5) == "mtia_") ++out_.mtia_records;
        if (!used) return in_.skip_object_rest();  // python_function, ac2g, gpu_user_annotation, ...
      } else if (k0 == 'n' && key == "name") {
        if (in_.peek() == json_scanner::kind::string) {
          e.name = names_(in_.read_string());
        } else {
          in_.skip_value();
        }
      } else if (k0 == 'p' && key == "pid") {
        bool negative = false;
        e.pid = read_id(negative);
      } else if (k0 == 't' && key == "tid") {
        e.tid = read_id(e.tid_negative);
      } else if (k0 == 't' && key == "ts") {
        ts_ok = read_time(e.ts, bad_ts_);
      } else if (k0 == 'd' && key == "dur") {
        dur_ok = read_time(e.dur, bad_dur_);
      } else if (k0 == 'a' && key == "args") {
        read_args(e, where);
      } else {
        in_.skip_value();
      }
    }
    if (!complete || !used) return;
    if (own != own_kind::none) own_event(e, where, own), ++out_.own_timeline_events;
    const std::string& name = e.name < names_table().size() ? names_table()[e.name] : empty_;
    if (!ts_ok) return problem("`" + name + "` has a timestamp that is not a non-negative number: " + shorten(bad_ts_));
    if (!dur_ok)
      return problem("`" + name + "` has a duration that is not a non-negative number: " + shorten(bad_dur_));
    if (e.ts > UINT64_MAX - e.dur) return problem("`" + name + "` ends past the end of time");
    if (out_.events.size() == limit_) {
      throw std::invalid_argument(name_ + ": more than " + std::to_string(limit_) +
                                  " events, more than steptrace reads (" + std::to_string(max_trace_events) +
                                  ", at byte " + std::to_string(in_.offset()) +
                                  "); profile fewer steps (the schedule's active=) or export one step range");
    }
    if (is_device_work(e.cat)) e.args = args_index(where);
    if (e.cat == event_cat::op && (inputs_.count > 0 || inputs_.flops_arg >= 0)) {
      const op_cost c = cost_of(name, inputs_);
      if (c.kind != op_kind::none) out_.op_costs.push_back({static_cast<std::uint32_t>(out_.events.size()), c});
    }
    out_.events.push_back(e);
  }

  // A time in microseconds (number or numeric string); the text is kept only when it is bad.
  bool read_time(std::uint64_t& ns, std::string& bad) {
    std::string_view text;
    bool was_string = false;
    if (in_.read_scalar(text, was_string) && parse_us_as_ns(text, ns)) return true;
    bad.assign(text.data(), text.size());
    return false;
  }

  static std::string shorten(const std::string& s) {
    if (s.empty()) return "(missing)";
    return s.size() > 40 ? s.substr(0, 40) + "..." : s;
  }
  const std::vector<std::string>& names_table() const { return out_.names; }
  const std::vector<std::string>& ids_table() const { return out_.ids; }

  json_scanner& in_;
  trace_events& out_;
  interner names_, ids_;
  std::size_t limit_;
  const std::string& name_;
  const std::string empty_;
  std::string bad_ts_, bad_dur_;
  op_inputs inputs_;
  std::string own_name_;               // reused: "steptrace:" and a phase's name
  std::vector<signed char> costable_;  // by name: -1 not yet asked
};

}  // namespace

trace_events read_trace_events(byte_source& source, const std::string& name, std::size_t event_limit) {
  trace_events out;
  out.names.emplace_back("");  // id 0: no name
  // Room for every event the bytes could hold, reserved once: pages never written are not
  // resident, and the vector is never copied while it grows (a copy held twice the events).
  try {
    out.events.reserve(std::min<std::uint64_t>(event_limit, source.size_hint() / min_event_bytes));
  } catch (const std::bad_alloc&) {  // no room to reserve (a strict overcommit policy): grown as read
  }
  json_scanner in(source, name);
  event_reader reader(in, out, event_limit, name);
  bool saw_events = false;
  const auto first = in.peek();
  if (first == json_scanner::kind::end) throw std::invalid_argument(name + ": the file is empty");
  if (first == json_scanner::kind::array) {  // the bare array form of the Chrome trace format
    reader.read_events();
    saw_events = true;
  } else if (first == json_scanner::kind::object) {
    in.enter_object();
    std::string_view key;
    while (in.next_key(key)) {
      if (key == "traceEvents" && in.peek() == json_scanner::kind::array) {
        reader.read_events();
        saw_events = true;
      } else if (key == "deviceProperties") {
        reader.read_device_properties();
      } else if (key == "distributedInfo") {
        reader.read_distributed_info();
      } else if (key == "host_name" && in.peek() == json_scanner::kind::string) {
        out.host = std::string(in.read_string().substr(0, 255));
      } else {
        in.skip_value();
      }
    }
  } else {
    in.fail("a trace starts with '{' or '['");
  }
  in.expect_end();
  if (!saw_events) throw std::invalid_argument(name + ": not a Chrome trace (no traceEvents array)");
  return out;
}

}  // namespace steptrace::detail

// Internal (not public API): turns one thread's records into finished steps.
//
// Rules (cpp/src/report/diagnosis/README.md, "Definitions"):
// - every instant of a step goes to the innermost open phase, or to `other` (id 0): that is a
//   phase's exclusive time; its inclusive time adds everything opened inside it, and the phase
//   it was opened inside is its parent (the phase tree);
// - an `input` phase that starts outside a step, with no phase open, is held; the next step
//   on the thread claims it and its window starts where that input started (a second such
//   input before a step begins releases the first as unscoped);
// - any other phase outside a step is unscoped: reported apart, never in step statistics;
// - the first `warmup` finished steps of the thread are marked warm-up, and apart from them
//   its first `warmup` batches;
// - time set aside (exclude_begin .. exclude_end) is in no step: the step's window skips it, and
//   phases, fetches and steps inside it are set aside with it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "gpu/device_record.hpp"
#include "steptrace/detail/ring.hpp"

namespace steptrace::detail {

struct phase_slice {
  static constexpr std::uint32_t no_parent = 0xffffffffu;
  std::uint32_t id;
  std::uint64_t ticks;  // exclusive time in this phase during the step
  std::uint32_t calls;
  std::uint64_t incl_ticks;  // inclusive: the phase and everything opened inside it
  std::uint32_t parent;      // the phase it was opened inside (its last call), or no_parent
};

// [begin, end) of a step spent with `phase` innermost; a step's segments tile its window.
struct host_segment {
  std::uint64_t begin, end;
  std::uint32_t phase;
};

// A phase call inside a step, for the timeline: its interval clipped to the step's window, and
// how deep it sat (0: opened with no phase open around it).
struct phase_span {
  std::uint64_t begin, end;
  std::uint32_t phase, depth;
};

struct built_step {
  std::uint64_t begin, end;  // ticks
  std::uint64_t set_aside;   // ticks of [begin, end) set aside: the step's length is the rest
  bool failed, warmup;
  bool first_of_thread;  // the thread's first counted step (since it started, or a reset)
  std::uint32_t thread;
  std::uint64_t index;                        // the thread's steps before this one (warm-up and failed ones too)
  const std::vector<phase_slice>& phases;     // only phases with time or calls in this step
  const std::vector<host_segment>& segments;  // in time order; at most max_segments_ (empty
                                              // unless the builder keeps segments)
  const std::vector<stream_key>& streams;     // the streams it worked on (empty: not known, or none)
  const std::vector<phase_span>& spans;       // its phase calls; at most max_spans (empty
                                              // unless the builder keeps spans)
  std::uint32_t spans_dropped;                // phase calls past max_spans
  std::uint32_t batch;                        // requests it served as one batch (0: not a batch)
  bool request;                               // a request's step (request.hpp), not a thread's
};

class step_sink {
 public:
  virtual void on_step(const built_step& step) = 0;
  virtual void on_unscoped(std::uint32_t id, std::uint64_t ticks) = 0;
  // A set-aside span under name `id` ended (the outermost one, when they nest).
  virtual void on_set_aside(std::uint32_t id, std::uint64_t begin, std::uint64_t end) = 0;

 protected:
  ~step_sink() = default;
};

// A phase (or a step) that ran with CUDA events around it: the slots of its begin and end events.
struct event_pair {
  static constexpr std::uint32_t step = 0xffffffffu;  // `phase` of a step's pair
  std::uint32_t phase, begin, end;                    // end may be no_event: free the begin slot, no time
  bool timed = true;                                  // false: free both slots, no time (warm-up, failed, reset)
};

class step_builder {
 public:
  static constexpr std::size_t default_max_segments = 4096;  // past this a step's last segment grows
  static constexpr std::size_t max_spans = 256;              // phase calls kept per step for the timeline
  // Past max_spans, the last tail_spans slots hold the latest-ending calls (a ring): a step keeps
  // its first and last calls, where a loop's input and its collectives are, and loses the middle.
  static constexpr std::size_t tail_spans = 64;

  // A thread names at most this many streams: stream_scope records index its table of them.
  static constexpr std::uint32_t max_streams = max_thread_streams;

  // stream_table: the thread's streams, written by the thread before the stream_scope record
  // that names one (nullptr: none are named).
  step_builder(std::uint32_t warmup_steps, std::uint32_t thread, const stream_key* stream_table = nullptr)
      : warmup_(warmup_steps), thread_(thread), stream_table_(stream_table) {}

  // Records in the order the thread wrote them. One call per run of records: the loop, and
  // the builder's state, stay in one function.
  void consume(const record* first, const record* last, step_sink& sink);
  // The same, stopping at the first request_block (returned; `last` if none): the drain routes
  // a request's block elsewhere, and finds it in the same pass that builds the thread's steps.
  const record* consume_until_block(const record* first, const record* last, step_sink& sink);
  void consume(const record& r, step_sink& sink) { consume(&r, &r + 1, sink); }
  // The thread is gone: a held input becomes unscoped, open steps and phases are dropped.
  void finish(step_sink& sink);
  // Forgets every finished step, warm-up included (the tracer was reset). A step open now is
  // not counted when it ends; phases open now stay open, so their ends match.
  void restart();
  // The memory now serves another thread: a new number, its own warm-up, nothing carried over.
  void rebind(std::uint32_t thread, std::uint32_t warmup_steps);
  void set_warmup(std::uint32_t steps) noexcept { warmup_ = steps; }
  // Another part of the thread's records follows, after finish() (a profiler run's next cycle):
  // its first `warmup_steps` steps are warm-up; the step numbers go on.
  void next_part(std::uint32_t warmup_steps) noexcept {
    warmup_ = static_cast<std::uint32_t>(finished_ - batches_finished_) + warmup_steps;
  }
  // Host segments are only read by the device view: without one, they are not built.
  void keep_segments(bool on) noexcept { keep_segments_ = on; }
  // A trace read from a file may hold steps of many thousands of phase changes, all needed for
  // the idle attribution; a live thread keeps the default bound.
  void set_max_segments(std::size_t n) noexcept { max_segments_ = n; }
  // Phase calls are only read by the timeline: without one, they are not kept.
  void keep_spans(bool on) noexcept { keep_spans_ = on; }
  // Calls of this phase (the host's collective: the job timeline aligns ranks on the last one of
  // a step) keep their slot in the ring of the latest calls while other calls pass through it.
  void set_anchor_phase(std::uint32_t id) noexcept { anchor_ = id; }
  // Tests: every phase end takes the general path, to hold the fast one to it.
  void general_path_only(bool on) noexcept { general_only_ = on; }
  // Its steps are requests': each a block of records of its own, from any thread.
  void set_requests(bool on) noexcept { requests_ = on; }
  std::uint32_t thread() const noexcept { return thread_; }
  // A step has begun and not ended (of the records consumed so far).
  bool in_step() const noexcept { return in_step_; }
  // The step open now, or the fetch (`input`) in progress that will begin it: its index, where it
  // began (ticks), the time set aside in it so far (ticks) and whether a set-aside span is open
  // now, and the phases open in it, outermost first, as (id, begin). False when neither is. A
  // fetch that has ended is held for the next step, but the thread is no longer in it: a loop whose
  // iterable ran out leaves its last fetch held for good, which is no step open.
  bool open_step(std::uint64_t& index, std::uint64_t& begin, std::uint64_t& set_aside, bool& aside_open,
                 std::vector<std::pair<std::uint32_t, std::uint64_t>>& phases) const {
    if (!in_step_ && capture_ != capture::open) return false;  // neither a step nor its fetch is open
    index = finished_;
    begin = begin_;
    set_aside = set_aside_;
    aside_open = excluding_ > 0;
    phases.clear();
    for (const open_phase& p : stack_) {
      if (!p.set_aside) phases.emplace_back(p.id, p.begin);
    }
    return true;
  }
  std::uint64_t unbalanced() const noexcept { return unbalanced_; }
  // Event pairs of phases ended since the last call (the caller harvests their device time).
  std::vector<event_pair>& event_pairs() noexcept { return event_pairs_; }

 private:
  enum class capture { none, open, held };
  struct open_phase {  // 32 bytes: the wide fields first
    std::uint64_t begin;
    std::uint64_t incl_from;  // inclusive time is charged from here on
    std::uint32_t id;
    std::uint32_t event = no_event;  // slot of its begin event
    bool counted;                    // its time goes into step accounting (not unscoped)
    bool inside_itself;              // an outer phase of the same name counts this time already
    bool set_aside;                  // opened inside a set-aside span: belongs to no step
  };
  inline void add_inclusive(open_phase& p, std::uint64_t t);

  bool accounting() const noexcept { return in_step_ || capture_ == capture::open; }
  // The three below run for every record the consumer reads: kept inline.
  inline void advance(std::uint64_t t);
  inline void charge(std::uint32_t id, std::uint64_t ticks, std::uint32_t calls, std::uint64_t incl = 0);
  void release_capture(step_sink& sink);
  void clear_step();
  void drop_open();
  inline void add_segment(std::uint64_t begin, std::uint64_t end, std::uint32_t id);
  inline void add_span(const open_phase& p, std::uint64_t end, std::size_t depth);
  inline void consume_one(const record& r, step_sink& sink);
  void note_event(const record& r);
  void note_stream(std::uint32_t index);
  void note_exclude(const record& r, step_sink& sink);
  void close_exclusion(std::uint64_t t);
  void pair_step_events(bool timed);
  void free_event(std::uint32_t& slot);

  std::uint32_t warmup_, thread_;
  const stream_key* stream_table_;
  std::uint64_t stream_mask_ = 0;  // the current step's streams, by index in stream_table_
  bool stream_unknown_ = false;    // it used a stream with no index: it is viewed on every stream
  std::vector<stream_key> streams_;
  std::uint64_t finished_ = 0, unbalanced_ = 0;
  std::uint64_t batches_finished_ = 0;  // of finished_: batches, whose warm-up is their own
  // Whether the open step is warm-up: the first `warmup_` steps, and apart from them the first
  // `warmup_` batches (a worker whose batches share the request builder leaves requests theirs).
  bool warming_up() const noexcept {
    return batch_ != 0 ? batches_finished_ < warmup_ : finished_ - batches_finished_ < warmup_;
  }
  bool in_step_ = false;
  bool discard_step_ = false;    // the open step began before a reset
  bool step_set_aside_ = false;  // a step opened inside a set-aside span: ignored whole
  std::uint32_t excluding_ = 0;  // depth of open set-aside spans
  std::uint32_t exclude_id_ = 0;
  std::uint64_t exclude_start_ = 0;     // where the open span began (reported)
  std::uint64_t exclude_cursor_ = 0;    // how far it has been taken out of a step
  std::uint64_t set_aside_ = 0;         // in the current step (or held fetch) so far
  std::uint64_t set_aside_in_gap_ = 0;  // between a held fetch and its step
  bool counted_any_ = false;
  bool keep_segments_ = true;
  std::size_t max_segments_ = default_max_segments;
  bool keep_spans_ = true;
  bool general_only_ = false;
  bool requests_ = false;
  std::uint32_t batch_ = 0;  // the open step's batch size
  std::uint32_t spans_dropped_ = 0;
  std::size_t tail_next_ = 0;           // past max_spans: the ring slot the next call takes
  std::uint32_t anchor_ = 0xffffffffu;  // set_anchor_phase (none)
  capture capture_ = capture::none;
  std::uint64_t begin_ = 0, last_ = 0, capture_end_ = 0;
  std::vector<open_phase> stack_;
  // A phase's figures in the current step, by phase id: one line of memory per record's phase.
  struct phase_acc {
    std::uint64_t ticks = 0, incl = 0;
    std::uint32_t calls = 0;
    std::uint32_t parent = phase_slice::no_parent;
    bool touched = false;  // in touched_
  };
  std::vector<phase_acc> acc_;
  std::vector<std::uint32_t> touched_;  // ids with time or calls in the current step
  std::vector<phase_slice> slices_;
  std::vector<host_segment> segments_;
  std::vector<phase_span> spans_;
  std::vector<event_pair> event_pairs_;
  std::uint32_t end_event_ = no_event;  // from an event_end, for the phase_end that follows
  std::uint32_t step_event_ = no_event, step_end_event_ = no_event;  // the open step's events
};

}  // namespace steptrace::detail

// steptrace/tracer.hpp — the tracer and its RAII scopes.
//
//   void handle(request& r) {                    // called from many worker threads
//     steptrace::scoped_step step;               // one request = one step (default tracer)
//     { STEPTRACE_PHASE("preprocess"); parse(r); }
//     { STEPTRACE_PHASE("compute");    infer(r); }
//   }                                            // an exception here marks the step failed
//
//   std::cerr << steptrace::default_tracer().summary().table();
//
// Hot path: begin/end of a step or phase reads the clock and writes one 16-byte record into a
// buffer owned by the calling thread. No allocation, lock, log line or device synchronisation
// (the first call on a new thread registers that thread once). A phase boundary is inlined
// into the caller (detail/ring.hpp); a disabled tracer costs one relaxed load per call.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "steptrace/capture.hpp"
#include "steptrace/config.hpp"
#include "steptrace/detail/ring.hpp"
#include "steptrace/export.hpp"
#include "steptrace/phase.hpp"
#include "steptrace/summary.hpp"

namespace steptrace {

enum class step_open { opened, disabled, nested };

namespace detail {
class tracer_impl;
}

class STEPTRACE_API tracer {
 public:
  tracer();  // options from the environment
  explicit tracer(const config& cfg);
  ~tracer();
  tracer(const tracer&) = delete;
  tracer& operator=(const tracer&) = delete;

  // Throws std::invalid_argument for a bad value. STEPTRACE_DISABLE=1 in the environment keeps
  // every tracer disabled whatever is configured.
  void configure(const config& cfg);
  config options() const;
  bool enabled() const noexcept { return mode_.load(std::memory_order_relaxed) != mode::off; }

  // The primitives under scoped_step / scoped_phase and the Python bindings.
  //
  // Given a CUDA stream (a cudaStream_t / CUstream; nullptr is the legacy default stream), a
  // step or phase also gets its device time: CUDA events recorded on the stream at both ends,
  // read later by query, never by a synchronise. Without a usable GPU it is the plain one.
  step_open begin_step() noexcept { return open_step(nullptr, false); }  // `nested`: one is open (counted)
  step_open begin_step(void* stream) noexcept { return open_step(stream, true); }
  void end_step(bool failed = false) noexcept;  // ends it on the stream it began on, if any
  void begin_phase(phase_id id) noexcept { mark_phase(id.value, detail::record_kind::phase_begin); }
  void end_phase(phase_id id) noexcept { mark_phase(id.value, detail::record_kind::phase_end); }
  void begin_phase(phase_id id, void* stream) noexcept {
    if (enabled()) record_phase_on(id.value, stream, true);
  }
  void end_phase(phase_id id, void* stream) noexcept {
    if (enabled()) record_phase_on(id.value, stream, false);
  }

  // Sets time aside: from begin_exclude to end_exclude on this thread, time belongs to no step
  // (an open step's window skips it, with any phase or fetch inside) and is reported apart
  // under `name`: calls, total, mean, share of the run. For checkpoints, validation, logging.
  // A step begun inside is no step (begin_step says `disabled`) and ends nothing.
  void begin_exclude(phase_id name) noexcept {
    if (enabled()) record_exclude(name.value, true);
  }
  void end_exclude(phase_id name) noexcept {
    if (enabled()) record_exclude(name.value, false);
  }

  // The step open on this thread is a batch serving `requests` requests: it is counted apart
  // from requests (`batches`: sizes, phases), for the server diagnosis. Not for the hot path.
  void set_batch_size(std::uint32_t requests) noexcept;

  // Records a fact about the setup for the diagnosis to use, e.g. ("dataloader.num_workers",
  // "0"); the latest value of a key wins. Not for the hot path.
  void set_fact(std::string_view key, std::string_view value);
  // Says which rank of a multi-process job this process is: every summary carries it, and at
  // exit only rank 0 prints its table and writes json_path, unless the path holds `{rank}`,
  // which each rank replaces with its number. The Python package calls it by itself when
  // torch.distributed is initialised.
  void set_rank(const rank_info& who);

  // Safe while other threads record. Open steps are not included. The default tracer's exit
  // report then knows the program has seen these steps (print_at_exit=auto).
  ::steptrace::summary summary() const;
  // The statistics since the last window (or since the start, or reset), and a new window
  // starts: for servers, which never reach the end of a run. The whole-run summary() is left
  // as it is. Host figures only (no device view, no timeline); prometheus() renders it.
  ::steptrace::summary window();
  // For a metrics endpoint (summary::prometheus() renders it): counts and sums since the start
  // (or reset), which only grow, so a scraper's rate() is right; p50/p95/p99/max over the
  // counted steps of the last `quantile_window_s` seconds (at most the latest 4096). Reading
  // it consumes nothing: any number of scrapers see the same figures. Host figures only.
  static constexpr double quantile_window_s = 60;
  ::steptrace::summary metrics() const;
  // Live windows for a listener inside the program (an experiment tracker, a metrics push).
  // From listen_windows() on, each live window (every `live` seconds, or 10 when live is 0) is
  // also queued, the latest `queued_windows` of them: a listener that falls behind loses the
  // oldest, counted (errors.windows_dropped). next_window waits up to timeout_s for the oldest;
  // empty at the timeout, or at once after stop_listening(), which wakes every waiter.
  static constexpr std::size_t queued_windows = 2;  // older ones are news no one needs
  void listen_windows();
  std::optional<live_window> next_window(double timeout_s);
  void stop_listening();
  void count_window_failure() noexcept;  // a listener failed on a window (errors.window_calls_failed)
  // The end of the live view, at the end of a run (exit_summary calls it first; the Python package
  // before its listeners stop): the window in progress, if it holds a counted step, goes out as
  // every window does (the live line, jsonl_path, the listeners' queue), however short, so a
  // run's last seconds and a run shorter than one period reach them. No window or line after it.
  void end_live();
  // Capture on trouble (capture.hpp): keeps the next `steps` steps (0: capture_steps) that begin
  // from now whole, writes them to capture_dir as a Chrome trace and says their diagnosis in a
  // block on stderr (also summary().captures, jsonl_path and the next live window). False when
  // one is already armed, or the run has had capture_max. More than 1000 steps (capture_steps'
  // bound) throws std::invalid_argument. The `capture` option's triggers arm it the same way,
  // weighed by the collector on each live window (the view turns on with them). `back`: the kept
  // steps written at once as well (capture_kept), when it arms.
  bool capture(std::uint32_t steps = 0, std::string_view reason = "on demand: capture()",
               kept_steps back = kept_steps::recent);
  // The retroactive capture (capture_back): steps already recorded, chosen now and written by the
  // collector to capture_dir as a Chrome trace with their diagnosis (a record with `retroactive`).
  // `recent`: the last capture_back steps; `window`: the capture_back slowest counted steps of the
  // live window that closed last and the one since; `slowest`: of the last 8 windows; `numbered`:
  // the kept steps numbered `indices` (another rank's choice). The
  // indices chosen, oldest first; none when capture_back is 0, none is kept, or one is being written.
  std::vector<std::uint64_t> capture_kept(std::string_view reason, kept_steps which,
                                          const std::vector<std::uint64_t>& indices = {});
  // A capture taken outside the core (Python's torch.profiler captures): kept with the core's, so
  // summary().captures, the JSON written at exit, the table and the next live window list it.
  void note_capture(capture_record record);
  // For a binding that weighs the triggers itself (Python: torch.profiler, the job's store): the
  // collector never weighs them nor handles SIGUSR2; capture() still works.
  void capture_triggers_elsewhere();
  // Rank 0 of a job with live rank windows (the Python package judges each window's straggler
  // with window_straggler): counts one window, its straggler (none: none) and the ranks late or
  // missing in it; summary().live_ranks and metrics() have the count. The straggler's count now.
  rank_window_count note_rank_window(const std::optional<straggler_info>& straggler, std::vector<std::uint32_t> late,
                                     std::vector<std::uint32_t> missing);
  // Forgets every recorded step and phase; warm-up starts again. A step open on another thread
  // at that moment is not counted, and leaves no error behind.
  void reset();
  // What to print at exit: once, in the process that created the tracer, only when steps were
  // recorded: the table, or one line when the program already fetched this summary (see
  // print_at_exit). Writes json_path too, whole or not at all. Empty otherwise. It is
  // exit_summary() then exit_write() with the summary unchanged.
  std::string exit_report();
  // The report at exit in two halves, for a binding that finishes the summary in between (the
  // Python package gathers the ranks and writes its HTML there), each called once, in order:
  //   if (auto end = t.exit_summary()) text = t.exit_write(*end, finished(end->own), end->seen);
  struct exit_state {
    ::steptrace::summary own;    // this process's summary, the live view ended
    bool seen = false;           // the program fetched it after its last step
    std::uint64_t recorded = 0;  // its steps: counted, warm-up and failed
    std::uint64_t open = 0;      // steps still open at exit (not counted; said in a line)
    // Whether a finishing step has anything to do: steps were recorded, or this is a rank of a
    // job (rank 0 must hear at once that this rank has nothing; a rank 0 with no steps of its
    // own still reports the others).
    bool to_finish() const noexcept { return recorded != 0 || own.rank.has_value(); }
  };
  // The first half: ends the live view and reads this process's summary. None in a forked
  // child, in another process than the creator's, or when called before.
  std::optional<exit_state> exit_summary();
  // The second half: writes json_path and trace_path of `s` (the summary finished from
  // `end.own`) and returns what to print (print_at_exit; rank 0 only): the table, one line when
  // `seen`, or nothing.
  std::string exit_write(const exit_state& end, const ::steptrace::summary& s, bool seen);
  // Steps begun and not ended now, on every thread (the records so far are drained first). At
  // exit, exit_report says in one line how many were never ended (they are not counted).
  std::uint64_t open_steps();
  // Says once, as an error line on stderr, that a nested step was ignored (scoped_step's only
  // way to tell; Python raises StepError instead).
  void warn_nested_step() const noexcept;

 private:
  friend class request;  // request.hpp: begins on the tracer, ends through a thread's ring

  // off: every call returns at once. bound: phases go through the inline path first.
  // unbound: every record goes through the library (no invariant TSC, or NVTX ranges wanted).
  enum class mode : std::uint8_t { off, bound, unbound };

  void mark_phase(std::uint32_t id, detail::record_kind kind) noexcept {
    const mode m = mode_.load(std::memory_order_relaxed);
    if (m == mode::off) return;
    if (__builtin_expect(m == mode::bound, 1) && detail::push_bound(uid_, kind, id)) return;
    record_phase(id, kind == detail::record_kind::phase_begin);
  }
  step_open open_step(void* stream, bool on_stream) noexcept;
  ::steptrace::summary collect_summary(bool shown) const;    // shown: the program fetched it
  void record_phase(std::uint32_t id, bool begin) noexcept;  // the slow path: binds the thread
  void record_phase_on(std::uint32_t id, void* stream, bool begin) noexcept;
  void record_exclude(std::uint32_t id, bool begin) noexcept;

  std::atomic<mode> mode_{mode::off};
  std::uint64_t uid_ = 0;  // never reused: what this thread's binding is checked against
  std::unique_ptr<detail::tracer_impl> impl_;
};

// Extra directories to look for libcupti in when the first step starts the GPU backend (the
// Python package passes those of the nvidia-cuda-cupti wheel). The library path and the CUDA
// toolkit (CUDA_HOME, /usr/local/cuda) are searched anyway.
STEPTRACE_API void set_gpu_library_dirs(std::vector<std::string> dirs);

// Another tool that collects CUPTI activity (a profiler) is about to start, or has stopped:
// steptrace hands CUPTI over, and takes it back. Meanwhile phases given a stream are still
// timed with CUDA events, and steps that overlap the time are counted apart in the device
// figures. The Python package calls these around torch.profiler on its own; C++ programs that
// run Kineto or another CUPTI client call them around it.
STEPTRACE_API void yield_cupti(const std::string& holder) noexcept;
STEPTRACE_API void reclaim_cupti() noexcept;
STEPTRACE_API std::string cupti_holder();  // the tool holding CUPTI now ("" for none)

// The DataLoader num_workers the INPUT-BOUND advice suggests on this machine (from the cores
// this process may use).
STEPTRACE_API long suggested_loader_workers() noexcept;

// The process-wide tracer the macros and the Python module functions use. Created on first
// use (never at static-initialisation time) with options from the environment.
STEPTRACE_API tracer& default_tracer();

class scoped_step {
 public:
  explicit scoped_step(tracer& t = default_tracer()) noexcept : scoped_step(t, t.begin_step()) {}
  // `stream`: a cudaStream_t (nullptr: the default stream); the step also gets its device time.
  scoped_step(tracer& t, void* stream) noexcept : scoped_step(t, t.begin_step(stream)) {}
  ~scoped_step() {
    if (state_ == step_open::opened) tracer_.end_step(std::uncaught_exceptions() > exceptions_);
  }
  // `nested` when the thread already had a step open: this one records nothing.
  step_open state() const noexcept { return state_; }

  scoped_step(const scoped_step&) = delete;
  scoped_step& operator=(const scoped_step&) = delete;
  void* operator new(std::size_t) = delete;

 private:
  scoped_step(tracer& t, step_open state) noexcept
      : tracer_(t), exceptions_(std::uncaught_exceptions()), state_(state) {
    if (state_ == step_open::nested) tracer_.warn_nested_step();
  }

  tracer& tracer_;
  int exceptions_;
  step_open state_;
};

class scoped_phase {
 public:
  scoped_phase(tracer& t, phase_id id) noexcept : tracer_(t), id_(id) { tracer_.begin_phase(id_); }
  // `stream`: a cudaStream_t (nullptr: the default stream); the phase also gets its device time.
  scoped_phase(tracer& t, phase_id id, void* stream) noexcept : tracer_(t), id_(id), stream_(stream), on_stream_(true) {
    tracer_.begin_phase(id_, stream_);
  }
  // Registers the name on every call: prefer a phase_id kept in a static, or STEPTRACE_PHASE.
  scoped_phase(tracer& t, std::string_view name) : scoped_phase(t, register_phase(name)) {}
  ~scoped_phase() { on_stream_ ? tracer_.end_phase(id_, stream_) : tracer_.end_phase(id_); }

  scoped_phase(const scoped_phase&) = delete;
  scoped_phase& operator=(const scoped_phase&) = delete;
  void* operator new(std::size_t) = delete;

 private:
  tracer& tracer_;
  phase_id id_;
  void* stream_ = nullptr;
  bool on_stream_ = false;
};

// Time set aside until the end of the enclosing scope (see tracer::begin_exclude).
class scoped_exclude {
 public:
  scoped_exclude(tracer& t, phase_id name) noexcept : tracer_(t), name_(name) { tracer_.begin_exclude(name_); }
  scoped_exclude(tracer& t, std::string_view name) : scoped_exclude(t, register_phase(name)) {}
  ~scoped_exclude() { tracer_.end_exclude(name_); }

  scoped_exclude(const scoped_exclude&) = delete;
  scoped_exclude& operator=(const scoped_exclude&) = delete;
  void* operator new(std::size_t) = delete;

 private:
  tracer& tracer_;
  phase_id name_;
};

}  // namespace steptrace

#define STEPTRACE_CONCAT_INNER(a, b) a##b
#define STEPTRACE_CONCAT(a, b) STEPTRACE_CONCAT_INNER(a, b)

// Define STEPTRACE_COMPILED_OUT (e.g. -DSTEPTRACE_COMPILED_OUT) and both macros expand to
// nothing: no call, no static, the name not even evaluated, for builds that must pay zero.
#ifdef STEPTRACE_COMPILED_OUT
#define STEPTRACE_STEP() static_assert(true, "")
#define STEPTRACE_PHASE(name) static_assert(true, "")
#define STEPTRACE_EXCLUDE(name) static_assert(true, "")
#else
// A step on the default tracer until the end of the enclosing scope.
#define STEPTRACE_STEP() ::steptrace::scoped_step STEPTRACE_CONCAT(steptrace_step_, __LINE__)
// A phase on the default tracer until the end of the enclosing scope; the name is registered
// once per call site.
#define STEPTRACE_PHASE(name)                                                          \
  static const ::steptrace::phase_id STEPTRACE_CONCAT(steptrace_phase_id_, __LINE__) = \
      ::steptrace::register_phase(name);                                               \
  ::steptrace::scoped_phase STEPTRACE_CONCAT(steptrace_phase_, __LINE__) {             \
    ::steptrace::default_tracer(), STEPTRACE_CONCAT(steptrace_phase_id_, __LINE__)     \
  }
// Time set aside under `name` on the default tracer until the end of the enclosing scope.
#define STEPTRACE_EXCLUDE(name)                                                          \
  static const ::steptrace::phase_id STEPTRACE_CONCAT(steptrace_exclude_id_, __LINE__) = \
      ::steptrace::register_phase(name);                                                 \
  ::steptrace::scoped_exclude STEPTRACE_CONCAT(steptrace_exclude_, __LINE__) {           \
    ::steptrace::default_tracer(), STEPTRACE_CONCAT(steptrace_exclude_id_, __LINE__)     \
  }
#endif

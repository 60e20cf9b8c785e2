// Internal (not public API): what the device did during each step, and where the host was
// while the device sat idle (idle attribution: cpp/src/report/diagnosis/README.md).
//
// Device records are cut to the step's window for busy and idle time; copies, syncs and
// kernels are counted in the step in which they start, so none is counted twice.
//
// A step sees its own streams: those its phases (or the step itself) were given, on their own
// devices. Busy and idle time, the idle attribution and the counts are over them; a sync with no
// stream (context or event synchronise) counts in the steps with a stream in its context. The
// busy time of those devices as a whole, every stream, is kept apart (device_busy). A step that
// named no stream sees every stream of every device.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/histogram.hpp"
#include "analysis/kernel_table.hpp"
#include "analysis/step_builder.hpp"
#include "gpu/device_record.hpp"
#include "steptrace/summary.hpp"

namespace steptrace::detail {

struct step_device_view {
  std::uint64_t window = 0, busy = 0;        // ns; busy: on the step's own streams
  std::uint64_t device_busy = 0;             // ns: its devices' busy time, every stream
  bool all_streams = false;                  // it named no stream: busy is device-wide
  std::vector<std::uint64_t> idle_by_phase;  // ns, by phase id
  std::uint64_t h2d_bytes = 0, h2d_pageable_bytes = 0, h2d_ns = 0, h2d_count = 0;
  // Host-to-device copy time no kernel of its context overlaps (the compute units wait on it),
  // and the step's H2D copies until it is known.
  std::uint64_t h2d_exposed_ns = 0;
  std::vector<device_record> h2d_copies;
  std::uint64_t d2h_bytes = 0, d2h_pageable_bytes = 0, d2h_ns = 0, d2h_count = 0;
  std::uint64_t syncs = 0, sync_ns = 0;
  std::uint64_t kernels = 0;
  // Of them, those a graph's replay ran, and the replays (their launches' correlation ids, one
  // each once the step is added up; the totals keep only the count in graph_replays).
  std::uint64_t graph_kernels = 0, graph_replays = 0;
  std::vector<std::uint32_t> graph_launches;
  std::vector<std::uint64_t> kernel_ns;
  // Named kernels (live CUPTI records carry names; a trace's kernels are added up apart, in
  // profiler/trace_kernels.cpp) with the host phase open when each was launched, for the kernel
  // table; and the time of every copy and memset, for its kinds.
  struct kernel_call {
    std::uint32_t name, phase;  // phase: a phase id, or launch_not_seen / launched_outside
    std::uint64_t ns;
  };
  static constexpr std::uint32_t launch_not_seen = 0xffffffffu, launched_outside = 0xfffffffeu;
  std::vector<kernel_call> kernel_calls;
  std::uint64_t copy_ns = 0, memset_ns = 0;
  // Collective kernels, NCCL's and others' (counted among the kernels too): their time, and the
  // part of it no other kernel of their context overlaps (the communication compute does not hide).
  std::uint64_t nccl_kernels = 0, nccl_ns = 0, nccl_exposed_ns = 0;
  std::vector<device_record> nccl;  // the step's collective kernels, until their exposure is known
  // The collective kernels launched in the step, for the ranks' arrival at them (live rows).
  struct collective_launch {
    stream_key stream;
    std::uint64_t start, end;
    std::uint32_t phase;  // where the host was when it launched it (a phase id, or launched_outside)
  };
  std::vector<collective_launch> collectives;
  // Device memory allocated and released through CUDA during the step, and the highest it held
  // above what it held at the step's start.
  std::uint64_t mem_allocs = 0, mem_allocated = 0, mem_freed = 0, mem_peak = 0;
  std::vector<std::pair<std::uint64_t, std::int64_t>> mem_ops;  // (time, change): for the peak
};

// The reference view, visiting every record. records: sorted by start. segments: the step's host
// segments, already in ns. streams: the step's own (empty: every stream).
step_device_view view_step(std::uint64_t begin, std::uint64_t end, const std::vector<host_segment>& segments,
                           const std::vector<device_record>& records, const std::vector<stream_key>& streams = {});

class device_aggregate {
 public:
  void add(const step_device_view& v);
  // Per-step figures are over the steps added; shares of their summed windows.
  void fill(gpu_stats& out) const;
  // Everything but the collectives' numbering, which runs on (a rank's k-th call is every rank's).
  void clear() {
    auto numbering = std::move(collective_streams_);
    *this = device_aggregate{};
    collective_streams_ = std::move(numbering);
  }

  std::uint64_t incomplete = 0, dropped = 0;
  std::uint64_t uncovered = 0;    // steps not viewed: another tool held CUPTI during them
  std::uint64_t sampled_out = 0;  // steps not viewed: device_sample left their window out

 private:
  histogram busy_, idle_, kernel_, mem_peak_;
  kernel_table kernel_table_;  // named kernels by name, launching phase and kind
  std::uint64_t steps_ = 0, busy_total_ = 0, idle_total_ = 0, device_busy_total_ = 0, all_streams_ = 0;
  std::vector<std::uint64_t> idle_by_phase_;
  step_device_view totals_;
  // Each stream's collective kernels numbered in order, the streams by first use ("c0", "c1"...:
  // the same on every rank, whose process groups are made in one order), and the last few.
  struct collective_stream {
    std::uint32_t group;
    std::uint64_t next;
  };
  std::map<stream_key, collective_stream> collective_streams_;
  std::deque<collective_call> recent_collectives_;
};

// Holds counted steps until the device records of their window have arrived, then views them.
// Incremental: each record is kept by start in its stream's track and merged once into three busy
// unions (disjoint intervals): its stream's, its context's and every device's. A step's view
// visits only what lies in its window on its own streams, found by binary search, however many
// records are retained. Bounded: at most max_pending steps wait,
// and records older than every waiting step (or, with none waiting, older than retain_ns
// before the newest) are let go.
class device_join {
 public:
  static constexpr std::size_t max_pending = 16384;
  static constexpr std::uint64_t retain_ns = 10'000'000'000;

  void add_step(std::uint64_t begin, std::uint64_t end, std::vector<host_segment> segments,
                std::vector<stream_key> streams = {});
  void add_records(std::vector<device_record> batch);  // any order; sorted in place (move it in: no copy)
  // Views every waiting step that ended before `before` for good (all of them with UINT64_MAX).
  void join(std::uint64_t before);
  // The joined steps and, provisionally, every step still waiting, with the records so far: a
  // summary taken while work is in flight, which later summaries complete.
  void fill(gpu_stats& out) const;
  // Times when no device activity was recorded (another tool held CUPTI, or device_sample left the
  // window out). A step that overlaps one has no device records to trust: it is counted apart
  // (uncovered, or sampled_out when only windows left out overlap it), never viewed.
  void set_gaps(std::vector<cupti_gap> gaps) { gaps_ = std::move(gaps); }
  // [begin, end) (ns) overlaps such a time: its device records are not all there.
  bool unrecorded(std::uint64_t begin, std::uint64_t end) const { return covered(begin, end) != coverage::recorded; }
  std::uint64_t newest_record_end() const noexcept { return newest_; }
  // The kernels, copies, memsets and syncs that start in [begin, end) on `streams` (empty: every
  // stream) and the syncs with no stream of their contexts, by start, for the timeline: at most
  // `cap`, and past it up to collectives_past_cap collective (NCCL) kernels, which the job's
  // timeline aligns ranks on (the rest counted in *dropped). Records still retained only: call it
  // soon after join.
  static constexpr std::size_t collectives_past_cap = 64;
  void records_in(std::uint64_t begin, std::uint64_t end, const std::vector<stream_key>& streams, std::size_t cap,
                  std::vector<device_record>& out, std::uint32_t& dropped) const;

  device_aggregate totals;
  // With `recent_on`, the steps viewed for good since the last take_recent() too: a live
  // window's device view (the steps a second or so behind the window's host figures).
  bool recent_on = false;
  std::optional<gpu_stats> take_recent();  // empty when no step was viewed since the last take
  std::uint64_t cursor = 0;                // this reader's position in the backend's record store

 private:
  struct waiting {
    std::uint64_t begin, end;
    std::vector<host_segment> segments;
    std::vector<stream_key> streams;
  };
  struct interval {
    std::uint64_t begin, end;
  };
  using busy_union = std::deque<interval>;  // sorted, disjoint
  struct track {
    std::deque<device_record> records;  // sorted by start
    busy_union busy;
  };
  step_device_view view(const waiting& w) const;
  void count_in(const track& t, const waiting& w, step_device_view& v) const;
  enum class coverage { recorded, held, sampled_out };
  coverage covered(std::uint64_t begin, std::uint64_t end) const;
  void add_view(device_aggregate& to, const waiting& w, device_aggregate* also = nullptr) const;
  void let_go(std::uint64_t before);
  std::deque<waiting> waiting_;
  device_aggregate recent_;
  std::map<stream_key, track> streams_;               // syncs with no stream under {context, no_stream}
  std::map<std::uint32_t, busy_union> context_busy_;  // every stream of the context
  std::map<std::uint32_t, busy_union> compute_busy_;  // the context's kernels but NCCL's
  busy_union busy_;                                   // every stream of every device
  std::uint64_t newest_ = 0;
  std::vector<cupti_gap> gaps_;
};

}  // namespace steptrace::detail

// steptrace/job_timeline.hpp — one Chrome trace (Perfetto UI) of a job's slow steps: each rank's
// slowest steps, the same steps on the median rank, every rank aligned on its collectives' ends.
//
//   steptrace::job_timeline job;                     // 3 slowest steps a rank
//   for (const auto& path : rank_files) job.add(steptrace::read_file(path));
//   if (auto median = job.reference_rank()) job.set_reference(steptrace::read_file(file_of(*median)));
//   steptrace::write_file("job.trace.json", job.trace());
//
// A rank's steps are its main thread's (the one with the most steps in its timeline), matched
// across ranks by their index (the k-th step of one rank is the k-th of every rank). Each rank's
// times are moved so that the ends of its collectives meet the median rank's: per step, the last
// collective kernel's end (NCCL), else the last host `collective` span's (a CPU collective
// blocks every rank until the last arrives), else the step's end; the move is the median over
// the steps both hold. Bounded whatever the job: at most `max_ranks` ranks (those with the
// slowest steps), `slowest_per_rank` steps each, and `max_steps` steps of the median rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "steptrace/export.hpp"
#include "steptrace/summary.hpp"

namespace steptrace {

class STEPTRACE_API job_timeline {
 public:
  static constexpr std::uint32_t max_ranks = 64, max_steps = 64;

  // Throws std::invalid_argument for 0 or more than 16 steps a rank.
  explicit job_timeline(std::uint32_t slowest_per_rank = 3);

  // One rank's summary (its `rank` set; a summary without one is rank `ranks_added()`): keeps
  // its slowest counted steps and its step p50, nothing else. Throws std::invalid_argument for a
  // rank added twice.
  void add(const summary& rank);
  std::uint32_t ranks_added() const noexcept { return static_cast<std::uint32_t>(ranks_.size()); }

  // The rank whose step p50 is the job's median (the lower of the two middle ones); none before
  // a rank with counted steps was added.
  std::optional<std::uint32_t> reference_rank() const;
  // The steps (indices) the trace shows: the shown ranks' slowest, the slowest first, at most
  // max_steps; what set_reference keeps of the median rank.
  std::vector<std::uint64_t> wanted() const;
  // The median rank's summary, read again with its timeline whole: its steps in wanted() are kept
  // (its recorder may have let some go: a step it lacks is said in the trace's otherData).
  void set_reference(const summary& rank);

  // The Chrome trace event JSON: per rank a host and a device process, ordered by rank.
  std::string trace() const;

 private:
  struct rank_steps {
    std::uint32_t rank = 0;
    double p50_ms = 0;
    std::vector<timeline_step> slowest;    // the rank's own, slowest first
    std::vector<timeline_step> reference;  // the median rank only: the steps wanted of it
  };
  std::vector<const rank_steps*> shown() const;
  std::uint32_t slowest_per_rank_;
  std::vector<rank_steps> ranks_;
  bool reference_set_ = false;
};

}  // namespace steptrace

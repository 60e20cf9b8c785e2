// The table's device block: busy and idle, where the GPU sat idle, kernels, collectives,
// copies, CUDA memory, sampled windows and what another tool held.
#include <fmt/format.h>

#include <string>
#include <utility>

#include "report/diagnosis/diagnosis.hpp"
#include "report/report.hpp"
#include "report/table_text.hpp"

namespace steptrace::detail {
namespace {

std::string ms(double v) { return format_ms(v); }

}  // namespace

void device_lines(const summary& s, table_text& line) {
  if (s.gpu && s.steps > 0 && detail::ran_no_gpu_work(*s.gpu)) {
    line("");
    line("device     no GPU work in the {} steps viewed: no kernels, copies, memsets or syncs", s.gpu->steps_viewed);
  } else if (s.gpu && s.steps > 0) {
    const gpu_stats& g = *s.gpu;
    line("");
    line("device     busy {:.1f}% of step time: busy {} ms, idle {} ms per step (p95 idle {})", 100 * g.busy_share,
         ms(g.busy_ms.mean), ms(g.idle_ms.mean), ms(g.idle_ms.p95));
    if (g.steps_all_streams < g.steps_viewed) {  // some steps were viewed on their own streams only
      line("{:<11}on the steps' own streams; their devices, every stream: busy {:.1f}% of step time{}", "",
           100 * g.device_busy_share,
           g.steps_all_streams ? fmt::format(" ({} steps named no stream: viewed on every stream)", g.steps_all_streams)
                               : std::string());
    }
    if (!g.idle_by_phase.empty()) {
      std::string where;
      for (const auto& [phase, share] : g.idle_by_phase) {
        if (share < 0.005) break;
        where += fmt::format("{}{} {:.0f}%", where.empty() ? "" : ", ", phase, 100 * share);
      }
      line("{:<11}idle while the host was in: {}", "", where);
    }
    line(
        "{:<11}kernels {:.1f} per step, median {:.1f} us (half the kernel time in kernels under {:.1f} us); syncs "
        "{:.1f} per step, {} ms blocked",
        "", g.kernels_per_step, g.kernel_median_us, g.kernel_time_median_us, g.syncs_per_step, ms(g.sync_ms_per_step));
    if (g.kernels) detail::kernel_lines(*g.kernels, line.sink());
    if (g.nccl.kernels_per_step > 0) {
      line(
          "{:<11}collective kernels {:.1f} per step, {} ms per step, {} ms of it exposed (no other kernel overlapping)",
          "", g.nccl.kernels_per_step, ms(g.nccl.ms_per_step), ms(g.nccl.exposed_ms_per_step));
    }
    for (const auto& [name, c] : {std::pair<const char*, const copy_stats&>{"h2d", g.h2d}, {"d2h", g.d2h}}) {
      if (c.count == 0) continue;
      line("{:<11}{} copies: {:.2f} MB, {} ms per step, {:.1f} GB/s, {:.0f}% from pageable memory", "", name,
           c.bytes_per_step / 1e6, ms(c.ms_per_step), c.gb_per_s, 100 * c.pageable_share);
    }
    if (const device_memory_stats& m = g.memory; m.allocations_per_step > 0 || m.freed_mb_per_step > 0) {
      line(
          "{:<11}memory: CUDA allocated {:.2f} MB ({:.1f} calls) and freed {:.2f} MB per step; a step's peak above "
          "its start p50 {:.2f} MB, max {:.2f} MB; {:+.2f} MB over the run",
          "", m.allocated_mb_per_step, m.allocations_per_step, m.freed_mb_per_step, m.step_peak_mb_p50,
          m.step_peak_mb_max, m.net_mb);
    }
    if (g.sample_every > 1) {
      line(
          "{:<11}device_sample={}: CUPTI recorded one window in {}; the device figures are over the {} of {} steps in "
          "the recorded windows (CUDA events timed every step's phases given a stream)",
          "", g.sample_every, g.sample_every, g.steps_viewed,
          g.steps_viewed + g.steps_sampled_out + g.steps_without_records);
    }
    if (g.steps_without_records) {
      line(
          "{:<11}{} of {} steps ran while another tool (torch.profiler, Nsight) held CUPTI: the device figures are "
          "over the other {}",
          "", g.steps_without_records, g.steps_without_records + g.steps_viewed, g.steps_viewed);
    }
    // Said where it moves the per-step figures by 1% or more (the JSON has it always).
    if (const auto behind = detail::fact_double(s, "gpu.behind_at_summary_ms");
        behind && s.step_ms.total > 0 && *behind >= 0.01 * s.step_ms.total) {
      line(
          "{:<11}the GPU still ran the steps' work for {:.1f} ms after the summary was asked ({:.0f}% of the steps' "
          "time): the host ran ahead of it, and what the GPU ran after the last step ended is counted in no step",
          "", *behind, 100 * *behind / s.step_ms.total);
    }
    if (g.dropped_records || g.incomplete_records) {
      line("{:<11}{} device records dropped at the buffer cap, {} still running at a flush (not counted)", "",
           g.dropped_records, g.incomplete_records);
    }
  }
}

}  // namespace steptrace::detail

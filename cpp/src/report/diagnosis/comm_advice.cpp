// COMM-BOUND's words (cpp/src/report/diagnosis/README.md, "Definitions"): what the collectives cost, which kind of
// collective holds the most of it, and the overlap that kind allows first. The gain on the first
// line is added by report/diagnosis/gains.cpp.
#include <fmt/format.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/kernel_table.hpp"
#include "record/collective_kernels.hpp"
#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/gains.hpp"
#include "report/diagnosis/label_words.hpp"
#include "report/diagnosis/summary_facts.hpp"

namespace steptrace::detail {

namespace {

// The kind of collective with the most time: by the ops that launched the collective kernels
// (nccl:all_to_all launches NCCL's SendRecv kernels: the op says what it is), weighing the time
// no other kernel hid where a trace gave it, else their whole time; by the kernels' own names when
// no op tells (live, an op is the user's phase). Empty when nothing says.
struct largest_kind {
  std::string_view type;
  double ms = 0;         // a step
  bool exposed = false;  // ms is time no other kernel hid, not the whole time
  std::string launcher;  // the op (or kernel) with the most of it
};

largest_kind largest_collective(const summary& s) {
  largest_kind out;
  if (!s.gpu || !s.gpu->kernels) return out;
  const kernel_stats& k = *s.gpu->kernels;
  bool exposed = false;
  for (const op_row& r : k.ops) exposed = exposed || r.collective_exposed_ms_per_step > 0;
  std::map<std::string_view, double> by_type;
  std::map<std::string_view, std::pair<double, std::string>> top;  // by type: the launcher with the most
  auto add = [&](std::string_view type, double ms, const std::string& who) {
    if (type.empty() || ms <= 0) return;
    by_type[type] += ms;
    if (ms > top[type].first) top[type] = {ms, who};
  };
  for (const op_row& r : k.ops) {
    if (!catch_all_row(r.name))
      add(collective_type(r.name), exposed ? r.collective_exposed_ms_per_step : r.collective_ms_per_step, r.name);
  }
  if (by_type.empty()) {
    for (const kernel_row& r : k.kernels) {
      if (r.kind == "collective") add(collective_type(r.name), r.ms_per_step, short_kernel_name(r.name));
    }
    exposed = false;
  }
  for (const auto& [type, ms] : by_type) {
    if (ms > out.ms) out = {type, ms, exposed, top[type].second};
  }
  return out;
}

}  // namespace

bool inference_run(const summary& s) {
  const std::string* training = s.fact("trace.training");
  return training != nullptr && *training == "0";
}

// A trace with no backward: a forward pass, inference or serving, where tensor or expert
// parallelism puts collectives inside each layer. No gradient, bucket or prefetch of a trainer.
std::vector<std::string> inference_comm_advice(std::string_view type) {
  const std::string link = "check the interconnect: NCCL_DEBUG=INFO names the transport (NVLink, InfiniBand, sockets)";
  if (type == "all-gather") {
    return {
        "a forward pass that waits for an all-gather: keep the output sharded as far as the next step allows "
        "(gather the last position's logits or the sampled tokens only, not every position's), gather in lower "
        "precision (bf16, fp8), or overlap the gather with the next layer's compute",
        link};
  }
  if (type == "all-to-all") {
    return {
        "a mixture of experts' dispatch and combine with nothing beside them: overlap them with a second "
        "micro-batch's compute (two-batch overlap), dispatch in fp8, and balance the experts across ranks",
        link};
  }
  return {
      "tensor-parallel collectives inside each layer: overlap them with compute (async tensor parallelism, "
      "torch.compile's micro-pipeline TP), or fewer and smaller ones: sequence parallelism (a reduce-scatter "
      "and an all-gather in place of an all-reduce), an all-reduce fused with the next norm (a custom "
      "all-reduce kernel); or less tensor parallelism where the model fits",
      link};
}

// The collectives' exposed time, the kernels and CPU collectives holding it, and the largest kind.
static std::string comm_evidence(const summary& s, const cause_shares& c, const idle_groups& idle,
                                 const diagnosis_thresholds& t) {
  std::string out = fmt::format(
      "Collectives cost {:.1f}% of step time that no compute hides (the rule fires at {:.0f}%):", 100 * c.comm,
      100 * (s.gpu && s.gpu->steps_viewed ? t.device_cause_share : t.wait_share));
  const bool kernels = s.gpu && s.gpu->nccl.kernels_per_step > 0;
  if (kernels) {
    out += fmt::format(" {:.0f} collective kernels a step run {} ms, {} ms of it with no other kernel beside them",
                       s.gpu->nccl.kernels_per_step, format_ms(s.gpu->nccl.ms_per_step),
                       format_ms(s.gpu->nccl.exposed_ms_per_step));
  }
  const phase_stats* cpu = s.phase(collective_phase);
  if (cpu && cpu->ms.mean > 0) {
    out += fmt::format("{} the host blocks {} ms a step in CPU collectives (gloo)", kernels ? ";" : "",
                       format_ms(cpu->ms.mean));
    if (s.gpu && s.gpu->steps_viewed)
      out += fmt::format(", the GPU idle {:.1f}% of the step meanwhile", 100 * idle.collective);
  }
  out += ".";
  if (const largest_kind l = largest_collective(s); kernels && !l.type.empty()) {
    out += fmt::format(" The largest kind is {}: {} ms a step{} (`{}`).", l.type, format_ms(l.ms),
                       l.exposed ? " with no other kernel beside it" : " of collective kernels",
                       clip_name(l.launcher, 60));
  }
  return out;
}

std::vector<std::string> comm_advice(const summary& s) {
  const std::string_view type = largest_collective(s).type;
  if (inference_run(s)) return inference_comm_advice(type);
  const std::string gradients =
      "overlap communication with compute: DDP starts each bucket's all-reduce during backward (tune "
      "bucket_cap_mb, gradient_as_bucket_view=True); FSDP: backward_prefetch and forward_prefetch";
  const std::string fewer =
      "fewer, larger collectives: accumulate gradients over micro-batches with model.no_sync() on all but the "
      "last; activation checkpointing recomputes in backward and leaves less compute to hide communication";
  const std::string link = "check the interconnect: NCCL_DEBUG=INFO names the transport (NVLink, InfiniBand, sockets)";
  if (type == "all-to-all") {
    return {
        "overlap communication with compute: an all-to-all with nothing beside it waits for every rank's "
        "tokens or rows; run it while another batch computes: an embedding model's input distribution a batch "
        "ahead (TorchRec's TrainPipelineSparseDist), a mixture of experts' dispatch and combine beside a second "
        "micro-batch's compute; fewer bytes: dispatch in fp8",
        gradients, link};
  }
  if (type == "all-gather" || type == "reduce-scatter") {
    return {
        "overlap communication with compute: sharded parameters' all-gathers and gradients' reduce-scatters "
        "can run while the previous block computes: FSDP's forward_prefetch=True and "
        "backward_prefetch=BackwardPrefetch.BACKWARD_PRE (FSDP2: set_modules_to_forward_prefetch, "
        "set_modules_to_backward_prefetch); larger wrapped units make fewer, larger collectives",
        fewer, link};
  }
  if (type == "send/recv") {
    return {
        "overlap communication with compute: pipeline stages' sends and receives wait in the schedule's bubbles; "
        "more micro-batches a step, or an interleaved schedule (torch.distributed.pipelining's "
        "ScheduleInterleaved1F1B), leave less of them exposed",
        gradients, link};
  }
  return {gradients, fewer, link};
}

void comm_bound_words(const label_reading& r, diagnosis& d) {
  d.evidence = comm_evidence(r.s, r.c, r.idle, r.t) + r.close;
  d.advice = comm_advice(r.s);
}

}  // namespace steptrace::detail

// INPUT-BOUND's words and advice: specific where the tracer knows the DataLoader's settings and the CPU
// (cpp/src/report/diagnosis/README.md, "Definitions"); the thresholds live in report/diagnosis/diagnosis.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "report/diagnosis/diagnosis.hpp"
#include "report/diagnosis/label_words.hpp"

namespace steptrace::detail {

long suggested_workers(long cpus) { return std::min(std::max(2L, std::min(8L, cpus / 2)), std::max(1L, cpus)); }

// Whether the process and its workers ask for cpu_demand_share of the cores or more.
bool cpu_saturated(const summary& s, const diagnosis_thresholds& t) {
  const auto demand = cpu_demand(s);
  const long cpus = fact_int(s, "host.cpus").value_or(0);
  return demand && cpus > 0 && *demand >= t.cpu_demand_share * static_cast<double>(cpus);
}

// Loader advice, specific where the tracer knows the DataLoader's settings.
std::vector<std::string> input_advice(const summary& s, const diagnosis_thresholds& t) {
  std::vector<std::string> advice;
  const auto workers = fact_int(s, "dataloader.num_workers");
  const long cpus = fact_int(s, "host.cpus").value_or(0);
  const auto workers_busy = fact_double(s, "cpu.workers_cores_busy");
  // Workers that use little CPU wait on something else (storage, the network, sleeps): the
  // samples are not what holds the cores, whatever the process tree asks for.
  const bool workers_idle =
      workers && *workers > 0 && workers_busy && *workers_busy < t.idle_worker_cores * static_cast<double>(*workers);
  if (const auto demand = cpu_demand(s); cpu_saturated(s, t) && workers_idle) {
    const auto threads = fact_int(s, "torch.num_threads");
    advice.push_back(fmt::format(
        "the {} worker{} use only {:.1f} cores between them, so the samples are not what holds the CPU: the "
        "training process itself asks for most of the {:.1f} cores wanted on these {} ({}): run fewer of its own "
        "threads first; then more workers help, since they wait rather than compute",
        *workers, *workers == 1 ? "" : "s", *workers_busy, *demand, cpus,
        threads ? fmt::format("its {} intra-op threads: torch.set_num_threads", *threads)
                : std::string("torch.set_num_threads, OMP_NUM_THREADS")));
    return advice;
  }
  if (const auto demand = cpu_demand(s); cpu_saturated(s, t)) {
    const std::string who = workers && *workers > 0
                                ? fmt::format("{} worker{} and the training thread", *workers, *workers == 1 ? "" : "s")
                                : std::string("the training thread and the rest of this process");
    advice.push_back(
        fmt::format("{} ask for {:.1f} of the {} cores here, so the CPU is saturated: more workers or "
                    "prefetch won't help; make samples cheaper or move decoding off the CPU",
                    who, *demand, cpus));
    advice.push_back("cache decoded samples, decode on the GPU, or move transforms to compiled code");
    return advice;
  }
  const long suggest = suggested_workers(cpus);
  if (workers_idle) {
    // The workers wait on something other than the CPU (storage, the network, sleeps): the
    // core count is no bound on how many help.
    advice.push_back(
        fmt::format("the {} worker{} use only {:.1f} cores between them: they wait on I/O, not the CPU, "
                    "so more help even beyond the {} cores here: try {}={}",
                    *workers, *workers == 1 ? "" : "s", *workers_busy, cpus > 0 ? std::to_string(cpus) : "?",
                    loader_setting(s, "num_workers"), 2 * *workers));
    if (const auto prefetch = fact_int(s, "dataloader.prefetch_factor"); prefetch && *prefetch < 4) {
      advice.push_back(
          fmt::format("{}={}: try 4 so more reads are in flight", loader_setting(s, "prefetch_factor"), *prefetch));
    }
    return advice;
  }
  if (workers && *workers == 0 && cpus <= 0) {  // a trace read from a file: the core count is not known
    advice.push_back(
        fmt::format("{} loads every batch on the training thread: try {}=4, not above the machine's core count",
                    loader_call(s, loader_setting(s, "num_workers") + "=0"), loader_setting(s, "num_workers")));
  } else if (workers && *workers == 0) {
    advice.push_back(fmt::format("{} loads every batch on the training thread; on this {}-core machine try {}={}",
                                 loader_call(s, loader_setting(s, "num_workers") + "=0"), cpus,
                                 loader_setting(s, "num_workers"), suggest));
  } else if (workers && cpus > 0 && *workers < suggest) {
    advice.push_back(
        fmt::format("{}={}: try {} ({} cores here)", loader_setting(s, "num_workers"), *workers, suggest, cpus));
  } else if (!workers && fact_bool(s, "dataloader.multiprocessing") == true) {
    // A trace of a loader already in worker processes (`_MultiProcessingDataLoaderIter`): the
    // workers do not keep up with the steps, and their count is not in the trace.
    advice.push_back(
        "the DataLoader already loads in worker processes (`_MultiProcessingDataLoaderIter`) and the training thread "
        "still waits for them: each batch costs the workers more than a step; add workers while cores are free, "
        "prefetch_factor=4 so batches are ready ahead, persistent_workers=True so they are not restarted each epoch");
    advice.push_back(
        "make each sample cheaper in the dataset's __getitem__: cache decoded data, move transforms to "
        "compiled code or the GPU; pin_memory=True for the copies");
    return advice;
  } else if (!workers) {
    advice.push_back(
        fmt::format("{}: start near 4, not above the core count, so loading and collating leave the training thread",
                    loader_call(s, loader_setting(s, "num_workers") + "=N")));
  }
  if (fact_bool(s, "dataloader.persistent_workers") == false && workers.value_or(0) > 0) {
    advice.push_back(loader_setting(s, "persistent_workers") + "=True: workers are restarted every epoch now");
  }
  if (const auto prefetch = fact_int(s, "dataloader.prefetch_factor");
      prefetch && *prefetch < 4 && workers.value_or(0) > 0) {
    advice.push_back(
        fmt::format("{}={}: try 4 so batches are ready ahead", loader_setting(s, "prefetch_factor"), *prefetch));
  }
  if (!workers) {
    advice.push_back(fmt::format("{}=True and {}=2..4 keep workers and batches ready",
                                 loader_setting(s, "persistent_workers"), loader_setting(s, "prefetch_factor")));
  }
  advice.push_back("make each sample cheaper: cache decoded data, move transforms to compiled code or the GPU");
  return advice;
}

}  // namespace steptrace::detail

namespace steptrace::detail {

void input_bound_words(const label_reading& r, diagnosis& d) {
  const summary& s = r.s;
  const bool server = is_server_run(s);  // a server's requests wait, not a training thread
  const std::string_view waits_for_data =
      server ? " Requests wait for their input." : " The training thread waits for data.";
  d.evidence = r.device ? device_cause_words(s, "input", r.idle.input, r.t.device_cause_share) +
                              idle_evidence(s, "input") + " " + phase_evidence(s, "input", -1)
                        : phase_evidence(s, "input", r.t.input_share) + std::string(waits_for_data);
  d.evidence += r.close;
  if (!server) d.advice = input_advice(s, r.t);  // a server's input advice is its own (server_advice.cpp)
}

}  // namespace steptrace::detail

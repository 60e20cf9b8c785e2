// A trace's reading summarised two ways (profiler/trace_summary.hpp): kept, as a run of cycles
// does (its records read again after), and given up, as read_file does (its device records and
// kernel table taken, its host records freed): the same summary either way.
#include <catch2/catch.hpp>
#include <string>
#include <utility>

#include "profiler/bytes/byte_source.hpp"
#include "profiler/trace_events.hpp"
#include "profiler/trace_rules.hpp"
#include "profiler/trace_summary.hpp"
#include "trace_files.hpp"

using namespace steptrace;
using namespace steptrace::detail;
using namespace steptrace::testing;

TEST_CASE("a reading given to its summary gives the summary a reading kept gives, and keeps nothing", "[profiler]") {
  // resnet50_num_workers_4: a warm-up step by evidence (untraced spans, joined as a batch of
  // their own); hta_sampled_rank0: one step, kernels without their launches; hta_nccl_data: NCCL.
  for (const char* file :
       {"resnet50_num_workers_4.pt.trace.json.gz", "hta_sampled_rank0.json.gz", "hta_nccl_data.json.gz"}) {
    INFO(file);
    const auto source = open_trace_file(data(file));
    const trace_events events = read_trace_events(*source, file);
    const trace_reading kept = apply_trace_rules(events, file);
    trace_reading given = kept;
    REQUIRE(!given.records.empty());
    REQUIRE(!given.device.empty());
    if (std::string(file).rfind("resnet", 0) == 0) REQUIRE(!kept.untraced.empty());  // the second batch is joined
    const std::string from_kept = summarise_trace(events, kept, file).json();
    const std::string from_given = summarise_trace(events, std::move(given), file).json();
    CHECK(from_given == from_kept);
    CHECK(given.records.capacity() == 0);  // NOLINT(bugprone-use-after-move): what it left behind
    CHECK(given.device.empty());
  }
}

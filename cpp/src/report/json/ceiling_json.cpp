// The ceiling section of the summary JSON (steptrace/ceiling.hpp; docs/json.md, "ceiling").
#include "analysis/ceiling.hpp"
#include "report/json/json_fields.hpp"

namespace steptrace::detail {

json_doc ceiling_json(const ceiling_stats& c) {
  json_doc ops = json_doc::array();
  for (const ceiling_row& r : c.ops) {
    ops.push_back({{"op", r.op},
                   {"kind", r.kind},
                   {"dtype", r.dtype},
                   {"calls_per_step", r.calls_per_step},
                   {"ms_per_step", r.ms_per_step},
                   {"gflop_per_step", r.gflop_per_step},
                   {"mb_per_step", r.mb_per_step},
                   {"tflops", r.tflops},
                   {"gb_per_s", r.gb_per_s},
                   {"bound", r.bound},
                   {"roof_share", r.roof_share},
                   {"gain_ms_per_step", r.gain_ms_per_step},
                   {"to_half", r.to_half}});
  }
  return json_doc{{"gpu", c.gpu},
                  {"device", c.device},
                  {"flops_from", c.flops_from},
                  {"gflop_per_step", c.gflop_per_step},
                  {"tflops", c.tflops},
                  {"mfu", c.mfu},
                  {"peak_dtype", c.peak_dtype},
                  {"peak_tflops", c.peak_tflops},
                  {"costed_share", c.costed_share},
                  {"gain", c.gain},
                  {"gain_assumption", c.gain_assumption},
                  {"half_dtype", c.half_dtype},
                  {"impossible", c.impossible},
                  {"ops", ops}};
}

ceiling_stats ceiling_from(const json_doc& j) {
  ceiling_stats c;
  c.gpu = j.at("gpu").get<std::string>();
  c.device = j.at("device").get<std::string>();
  c.flops_from = j.at("flops_from").get<std::string>();
  c.gflop_per_step = number_at(j, "gflop_per_step");
  c.tflops = number_at(j, "tflops");
  c.mfu = number_at(j, "mfu");
  c.peak_dtype = j.at("peak_dtype").get<std::string>();
  c.peak_tflops = number_at(j, "peak_tflops");
  c.costed_share = number_at(j, "costed_share");
  c.gain = number_at(j, "gain");
  c.gain_assumption = j.at("gain_assumption").get<std::string>();
  c.half_dtype = j.at("half_dtype").get<std::string>();
  for (const json_doc& o : j.at("ops")) {
    ceiling_row r;
    r.op = o.at("op").get<std::string>();
    r.kind = o.at("kind").get<std::string>();
    r.dtype = o.at("dtype").get<std::string>();
    r.calls_per_step = number_at(o, "calls_per_step");
    r.ms_per_step = number_at(o, "ms_per_step");
    r.gflop_per_step = number_at(o, "gflop_per_step");
    r.mb_per_step = number_at(o, "mb_per_step");
    r.tflops = number_at(o, "tflops");
    r.gb_per_s = number_at(o, "gb_per_s");
    r.bound = o.at("bound").get<std::string>();
    r.roof_share = number_at(o, "roof_share");
    r.gain_ms_per_step = number_at(o, "gain_ms_per_step");
    r.to_half = o.at("to_half").get<bool>();
    c.ops.push_back(std::move(r));
  }
  if (j.contains("impossible") && j.at("impossible").is_string()) c.impossible = j.at("impossible").get<std::string>();
  if (c.impossible.empty()) refuse_impossible(c);  // a file's figures held to what a device can give
  return c;
}

}  // namespace steptrace::detail

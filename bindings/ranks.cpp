// Ranks and captures as Python sees them: the ranks' combined report, the live rows and their
// straggler, the capture rule Python's window thread weighs and a capture's lines.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "glue.hpp"
#include "register.hpp"
#include "steptrace/capture.hpp"
#include "steptrace/steptrace.hpp"

namespace py = pybind11;

namespace steptrace::bindings {

namespace {

// A capture's record from the dict Summary.to_dict() gives it.
capture_record capture_of(const py::dict& c) {
  capture_record r;
  r.reason = c["reason"].cast<std::string>();
  r.first_step = c["first_step"].cast<std::uint64_t>();
  r.last_step = c["last_step"].cast<std::uint64_t>();
  r.steps = c["steps"].cast<std::uint64_t>();
  r.rank = c["rank"].cast<std::uint32_t>();
  r.label = c["label"].is_none() ? "" : c["label"].cast<std::string>();
  r.evidence = c["evidence"].cast<std::string>();
  r.advice = c["advice"].cast<std::string>();
  r.path = c["path"].cast<std::string>();
  r.cost_s = c["cost_s"].cast<double>();
  r.tool = c["tool"].cast<std::string>();
  if (c.contains("retroactive") && c["retroactive"].cast<bool>()) {
    r.retroactive = true;
    r.indices = c["indices"].cast<std::vector<std::uint64_t>>();
    r.tripped = c["tripped"].cast<std::uint64_t>();
  }
  return r;
}

}  // namespace

void bind_ranks(py::module_& m) {
  m.def(
      "combine_ranks",
      [](const std::vector<py::tuple>& reports, std::uint32_t world_size, double timeout_s, bool from_files,
         const std::vector<std::pair<std::uint32_t, std::string>>& refused) {
        // (summary, waits, collectives[, device_wait_ms[, the trace's summary, whose collective calls it carries]])
        std::vector<rank_report> in;
        for (const py::tuple& r : reports) {
          in.push_back({r[0].cast<summary>(), r[1].cast<std::vector<double>>(), r[2].cast<std::uint64_t>(),
                        r.size() > 3 ? r[3].cast<double>() : 0.0});
          if (r.size() > 4) {
            const summary& traced = r[4].cast<const summary&>();
            in.back().calls = traced.collective_calls;
            in.back().calls_numbered = traced.collective_calls_numbered;
          }
        }
        return combine_ranks(in, world_size, timeout_s, from_files, refused);
      },
      py::arg("reports"), py::arg("world_size"), py::arg("timeout_s"), py::arg("from_files") = false,
      py::arg("refused") = std::vector<std::pair<std::uint32_t, std::string>>{});
  m.def("rank_digest", &rank_digest, py::arg("summary"));
  m.def(
      "live_row",  // waits_ms: this rank's last waits at DDP's all-reduce, the first numbered first_seq
      [](const summary& window, const std::vector<double>& waits_ms, std::uint64_t first_seq) {
        if (waits_ms.empty()) return live_row(window);
        summary w = window;
        w.collective_calls.clear();
        for (std::size_t i = 0; i < waits_ms.size(); ++i) {
          w.collective_calls.push_back({"ddp", "all-reduce", first_seq + i, -1e3 * waits_ms[i], 0.0, ""});
        }
        return live_row(w);
      },
      py::arg("window"), py::arg("waits_ms") = std::vector<double>{}, py::arg("first_seq") = 0);
  m.attr("MIN_WINDOW_STEPS") = min_window_steps;
  m.def(
      "window_straggler",  // a dict, or None
      [](const std::vector<std::string>& rows) -> py::object {
        const std::optional<straggler_info> s = window_straggler(rows);
        if (!s) return py::none();
        py::dict out;
        out["rank"] = s->rank, out["phase"] = s->phase, out["excess_ms"] = s->excess_ms;
        out["own_wait_ms"] = s->own_wait_ms, out["others_wait_ms"] = s->others_wait_ms;
        out["median_rank"] = s->median_rank;
        auto text = [](const std::string& v) {  // bytes as Python spells names
          PyObject* o = name_text(v);
          if (o == nullptr) throw py::error_already_set();
          return py::reinterpret_steal<py::str>(o);
        };
        if (s->arrivals_compared > 0) {  // from the rows' arrival at their last collectives
          out["arrivals_last"] = s->arrivals_last, out["arrivals_compared"] = s->arrivals_compared;
          out["arrival_late_ms"] = s->arrival_late_ms;
          out["before"] = text(s->before);
        }
        if (!s->node.empty()) out["node"] = text(s->node);
        if (!s->within.empty()) {  // a named phase inside `phase`; its bytes as Python spells names
          out["within"] = text(s->within);
          out["within_ms"] = s->within_ms;
          const std::string words = straggler_within_words(*s);  // the exit's words, for rank 0's line
          PyObject* said = PyUnicode_DecodeUTF8(words.data(), static_cast<Py_ssize_t>(words.size()), "replace");
          if (said == nullptr) throw py::error_already_set();
          out["within_words"] = py::reinterpret_steal<py::str>(said);
        }
        return std::move(out);
      },
      py::arg("rows"));
}

void bind_capture(py::module_& m) {
  py::class_<capture_rule>(m, "CaptureRule")  // capture.hpp: the triggers Python's window thread weighs
      .def(py::init<std::string_view>(), py::arg("spec"))
      .def("weigh", &capture_rule::weigh, py::arg("step_p50_ms"), py::arg("step_p95_ms"), py::arg("label"),
           py::arg("phase_share"), py::arg("step_max_ms") = 0.0)
      .def_property_readonly("fired", &capture_rule::fired)
      .def("cool", &capture_rule::cool, py::arg("windows") = capture_rule::cool_down)
      .def("has", &capture_rule::has, py::arg("trigger"))
      .def_property_readonly("phase", &capture_rule::phase);
  m.attr("CAPTURE_COOL_DOWN") = capture_rule::cool_down;
  m.def(
      "capture_block",  // the capture's lines, from its record as Summary.to_dict() gives it
      [](const py::dict& c) { return capture_block(capture_of(c)); }, py::arg("record"));
  m.def(
      "note_capture",  // a torch.profiler capture, kept with the core's (tracer::note_capture)
      [](tracer& t, const py::dict& c) { t.note_capture(capture_of(c)); }, py::arg("tracer"), py::arg("record"));
}

}  // namespace steptrace::bindings

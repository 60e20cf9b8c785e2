// steptrace._core.Summary and steptrace._core.Tracer: the summary's faces and the tracer's calls
// (the hot-path scopes are C types of their own: phases.cpp, scopes.cpp, step_loop.cpp).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "glue.hpp"
#include "register.hpp"
#include "steptrace/steptrace.hpp"

namespace py = pybind11;

namespace steptrace::bindings {

namespace {

// The binding's throwing forms, for pybind11's functions.
void open_step_or_throw(tracer& t, const stream_arg& stream) {
  if (!open_step(t, stream)) throw py::error_already_set();
}
}  // namespace

// A retroactive capture's choice as Python names it (capture.py).
kept_steps kept_steps_named(const std::string& which) {
  if (which == "recent") return kept_steps::recent;
  if (which == "window") return kept_steps::window;
  if (which == "slowest") return kept_steps::slowest;
  if (which == "numbered") return kept_steps::numbered;
  if (which == "none") return kept_steps::none;
  throw std::invalid_argument("steptrace: kept steps are 'recent', 'window', 'slowest', 'numbered' or 'none', not '" +
                              which + "'");
}

void bind_tracer(py::module_& m) {
  py::class_<summary>(m, "Summary")
      .def("table", &summary::table)
      .def("json", &summary::json)
      .def("trace", &summary::trace)
      .def("kernels_table", &summary::kernels_table)
      .def("drawn", &summary::drawn, py::arg("steps") = 8)
      .def("prometheus", &summary::prometheus, py::arg("prefix") = "steptrace")
      .def(
          "path_for",  // the path as the OS names it, back as Python names files
          [](const summary& s, const py::object& path) {
            return py::reinterpret_steal<py::object>(os_text(s.path_for(os_path(path.ptr()))));
          },
          py::arg("path"))
      .def_property_readonly("label",
                             [](const summary& s) -> py::object {
                               if (s.diag.label.empty()) return py::none();
                               return py::str(s.diag.label);
                             })
      .def_readonly("steps", &summary::steps)
      .def(
          "fact",
          [](const summary& s, const std::string& key) -> py::object {
            const std::string* v = s.fact(key);
            return v ? py::object(py::str(*v)) : py::object(py::none());
          },
          py::arg("key"))
      .def_property_readonly("recorded",  // every step it saw: counted, warm-up and failed
                             [](const summary& s) { return s.steps + s.warmup_steps + s.failed_steps; })
      .def_property_readonly("rank",
                             [](const summary& s) -> py::object {
                               if (!s.rank) return py::none();
                               return py::int_(s.rank->rank);
                             })
      .def_property_readonly("world_size",
                             [](const summary& s) -> py::object {
                               if (!s.rank) return py::none();
                               return py::int_(s.rank->world_size);
                             })
      .def_property_readonly("nccl_exposed_ms",
                             [](const summary& s) -> double {  // per step; 0 without
                               return s.gpu ? s.gpu->nccl.exposed_ms_per_step : 0.0;
                             })
      .def(  // a copy that says it is rank `rank` of `world_size` (a rank file that does not say)
          "with_rank",
          [](summary s, std::uint32_t rank, std::uint32_t world_size) {
            const std::string* host = s.fact("trace.host");  // a trace's host_name
            s.rank = rank_info{rank, world_size, -1, host ? *host : std::string(), {}};
            return s;
          },
          py::arg("rank"), py::arg("world_size"))
      .def_static("from_json", &summary::from_json, py::arg("text"));

  py::class_<tracer>(m, "Tracer")
      .def(py::init<>())
      .def("configure",
           [](tracer& t, const std::map<std::string, std::string>& options) {
             config c = t.options();
             for (const auto& [key, value] : options) c.set(key, value);
             t.configure(c);
           })
      .def("options",  // text forms, as config::get gives them; Python types them by the table
           [](const tracer& t) {
             const config c = t.options();
             py::dict out;  // a path of bytes outside UTF-8 (from the environment) as Python names files
             for (const option_info& o : options_table()) {
               const std::string v = c.get(o.name);
               out[py::str(o.name)] = py::reinterpret_steal<py::object>(os_text(v));
             }
             return out;
           })
      .def_property_readonly("enabled", &tracer::enabled)
      .def("begin_step", &open_step_or_throw, py::arg("stream") = py::none())
      .def("end_step", &tracer::end_step, py::arg("failed") = false)
      .def("begin_phase", [](tracer& t, std::uint32_t id) { t.begin_phase(phase_id{id}); })
      .def("end_phase", [](tracer& t, std::uint32_t id) { t.end_phase(phase_id{id}); })
      .def("begin_exclude", [](tracer& t, std::uint32_t id) { t.begin_exclude(phase_id{id}); })
      .def("end_exclude", [](tracer& t, std::uint32_t id) { t.end_exclude(phase_id{id}); })
      .def("set_fact", &tracer::set_fact, py::arg("key"), py::arg("value"))
      .def(
          "set_batch_size",
          [](tracer& t, std::uint32_t requests) {
            if (request* r = request_here(t)) return r->set_batch_size(requests);
            t.set_batch_size(requests);
          },
          py::arg("requests"))
      // Without the GIL: a summary may wait for the GPU to finish the steps' last work (up to 1 s).
      .def("summary", &tracer::summary, py::call_guard<py::gil_scoped_release>())
      .def("window", &tracer::window)
      .def("metrics", &tracer::metrics)
      .def("listen_windows", &tracer::listen_windows)
      .def(
          "next_window",  // (summary, step, at_s, slot) or None; waits without the GIL
          [](tracer& t, double timeout_s) -> std::optional<std::tuple<summary, std::uint64_t, double, std::int64_t>> {
            std::optional<live_window> w;
            {
              py::gil_scoped_release unlocked;
              w = t.next_window(timeout_s);
            }
            if (!w) return std::nullopt;
            return std::make_tuple(std::move(w->figures), w->step, w->at_s, w->slot);
          },
          py::arg("timeout_s"))
      .def("stop_listening", &tracer::stop_listening, py::call_guard<py::gil_scoped_release>())
      .def("end_live", &tracer::end_live, py::call_guard<py::gil_scoped_release>())
      .def("open_steps", &tracer::open_steps, py::call_guard<py::gil_scoped_release>())
      .def("count_window_failure", &tracer::count_window_failure)
      .def(
          "note_rank_window",  // straggler: window_straggler's dict or None; the straggler's count as a dict
          [](tracer& t, const py::object& straggler, std::vector<std::uint32_t> late,
             std::vector<std::uint32_t> missing) {
            std::optional<straggler_info> s;
            if (!straggler.is_none()) {
              s.emplace();
              s->rank = straggler["rank"].cast<std::uint32_t>();
              s->phase = straggler["phase"].cast<std::string>();
              if (straggler.contains("node")) s->node = straggler["node"].cast<std::string>();
            }
            const rank_window_count c = t.note_rank_window(s, std::move(late), std::move(missing));
            py::dict out;
            out["rank"] = c.rank, out["windows"] = c.windows, out["first_window"] = c.first_window;
            out["phase"] = c.phase;
            return out;
          },
          py::arg("straggler"), py::arg("late"), py::arg("missing"))
      .def(
          "capture",
          [](tracer& t, std::uint32_t steps, const std::string& reason, const std::string& back) {
            return t.capture(steps, reason, kept_steps_named(back));
          },
          py::arg("steps") = 0, py::arg("reason") = "on demand: capture()", py::arg("back") = "recent")
      .def(
          "capture_kept",  // the retroactive capture: which kept steps, "recent", "window", "slowest" or "numbered"
          [](tracer& t, const std::string& reason, const std::string& which,
             const std::vector<std::uint64_t>& indices) {
            return t.capture_kept(reason, kept_steps_named(which), indices);
          },
          py::arg("reason"), py::arg("which"), py::arg("indices") = std::vector<std::uint64_t>{})
      .def("capture_triggers_elsewhere", &tracer::capture_triggers_elsewhere)
      .def("reset", &tracer::reset)
      .def(
          "set_rank",
          [](tracer& t, std::uint32_t rank, std::uint32_t world_size, std::int64_t local_rank, const std::string& host,
             const std::string& started_at) {
            t.set_rank({rank, world_size, local_rank, host, started_at});
          },
          py::arg("rank"), py::arg("world_size"), py::arg("local_rank"), py::arg("host"), py::arg("started_at"))
      .def("exit_report", &tracer::exit_report)
      .def("exit_summary", &tracer::exit_summary)
      .def("exit_write", &tracer::exit_write, py::arg("end"), py::arg("summary"), py::arg("seen"));

  py::class_<tracer::exit_state>(m, "ExitState")  // the report at exit's first half (tracer.hpp)
      .def_readonly("own", &tracer::exit_state::own)
      .def_readonly("seen", &tracer::exit_state::seen)
      .def_readonly("recorded", &tracer::exit_state::recorded)
      .def_property_readonly("to_finish", &tracer::exit_state::to_finish);
}

}  // namespace steptrace::bindings

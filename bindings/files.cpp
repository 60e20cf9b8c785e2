// steptrace._core's files: a summary or a trace read (read_file, read_cycles; OtherFileKind, a
// ValueError, for a file of another kind such as an execution trace), a file written
// whole or a line appended whole (write_file, append_line; refusals as OSError), a report into
// a folder of this user's only (write_report, open_report_folder), a kernel name shortened, a job's timeline of slow
// steps (JobTimeline). Conversions only.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <system_error>
#include <vector>

#include "glue.hpp"
#include "register.hpp"
#include "steptrace/job_timeline.hpp"
#include "steptrace/profiler_trace.hpp"
#include "steptrace/steptrace.hpp"

namespace py = pybind11;
using namespace steptrace;

namespace {

// Runs `write` without the GIL; its std::system_error becomes OSError(errno, why, path), so
// callers catch FileNotFoundError & co. what() is "PATH: why": the errno's words, or why a
// planted link or file was refused.
template <typename Write>
void written_or_raised(const std::string& path, Write&& write) {
  try {
    py::gil_scoped_release unlocked;
    write();
  } catch (const std::system_error& e) {
    const int code = e.code().value();
    const std::string what = e.what(), head = path + ": ";
    const std::string why = what.rfind(head, 0) == 0 ? what.substr(head.size()) : std::strerror(code);
    // the path as Python spells names (bytes outside UTF-8 as surrogates), never a decode error
    const py::object name = py::reinterpret_steal<py::object>(bindings::os_text(path));
    PyErr_SetObject(PyExc_OSError, py::make_tuple(code, why, name).ptr());
    throw py::error_already_set();
  }
}

}  // namespace

void steptrace::bindings::bind_files(py::module_& m) {
  // a ValueError, so callers that catch those still do; a job's folder leaves such a file out
  py::register_exception<other_file_kind>(m, "OtherFileKind", PyExc_ValueError);
  m.def(
      "read_file",
      [](const std::string& path, const std::string& step, const std::string& name,
         std::vector<std::pair<std::string, std::string>> facts) {
        return read_file(path, {step, name, std::move(facts)});
      },
      py::arg("path"), py::arg("step") = "", py::arg("name") = "",
      py::arg("facts") = std::vector<std::pair<std::string, std::string>>{}, py::call_guard<py::gil_scoped_release>());
  m.def("short_kernel_name", &short_kernel_name, py::arg("name"));
  m.attr("SHORT_KERNEL_US") = short_kernel_us;
  m.def(
      "read_cycles",
      [](const std::vector<std::string>& paths, const std::string& step) {
        return read_profiler_cycles(paths, {step, ""});
      },
      py::arg("paths"), py::arg("step") = "", py::call_guard<py::gil_scoped_release>());
  m.def(
      "write_file",
      [](const py::object& given, const std::string& text) {
        const std::string path = bindings::os_path(given.ptr());
        written_or_raised(path, [&] { write_file(path, text); });
      },
      py::arg("path"), py::arg("text"));
  m.def(
      "append_line",
      [](const py::object& given, const std::string& line) {
        const std::string path = bindings::os_path(given.ptr());
        written_or_raised(path, [&] { append_line(path, line); });
      },
      py::arg("path"), py::arg("line"));
  m.def(
      "rank_path",
      [](const py::object& given, std::uint32_t rank) {
        const std::string path = rank_path(bindings::os_path(given.ptr()), rank);
        return py::reinterpret_steal<py::object>(bindings::os_text(path));
      },
      py::arg("path"), py::arg("rank"));
  m.def(
      "write_report",  // capture_dir's rule: a folder of this user's only (steptrace/output.hpp)
      [](const py::object& given, const std::string& name, const py::bytes& data, bool fresh) {
        const std::string folder = bindings::os_path(given.ptr()), text = data;
        std::string path;
        written_or_raised(folder, [&] { path = write_report(folder, name, text, fresh); });
        return py::reinterpret_steal<py::object>(bindings::os_text(path));
      },
      py::arg("folder"), py::arg("name"), py::arg("data"), py::arg("fresh") = false);
  m.def(
      "open_report_folder",
      [](const py::object& given) {
        const std::string folder = bindings::os_path(given.ptr());
        int fd = -1;
        written_or_raised(folder, [&] { fd = open_report_folder(folder); });
        return fd;
      },
      py::arg("folder"));
  py::class_<job_timeline>(m, "JobTimeline")
      .def(py::init<std::uint32_t>(), py::arg("slowest_per_rank") = 3)
      .def("add", &job_timeline::add, py::arg("summary"))
      .def("reference_rank", &job_timeline::reference_rank)
      .def("wanted", &job_timeline::wanted)
      .def("set_reference", &job_timeline::set_reference, py::arg("summary"))
      .def("trace", &job_timeline::trace, py::call_guard<py::gil_scoped_release>());
}

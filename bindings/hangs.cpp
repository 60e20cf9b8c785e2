// Hangs as Python sees them: the marks torch.distributed's wrapped collectives leave, the job's
// view from the ranks' rows, and every Python thread's stack in a hang report, written as
// faulthandler writes it (without the interpreter's lock, which the stuck thread may hold).
#include <dlfcn.h>
#include <pthread.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "glue.hpp"
#include "register.hpp"
#include "steptrace/steptrace.hpp"

namespace py = pybind11;

namespace steptrace::bindings {
namespace {

// CPython's own dump (faulthandler's, exported by every CPython 3.8+): every thread's frames,
// read without the GIL. Looked up at import; absent, the report says why.
using dump_fn = const char* (*)(int, PyInterpreterState*, PyThreadState*);
dump_fn g_dump = nullptr;
PyInterpreterState* g_interpreter = nullptr;

void write_text(int fd, const char* text) {
  std::size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(fd, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<std::size_t>(n);
  }
}

// Where CPython keeps its dump to itself (3.10, 3.13: not exported), faulthandler's own handler
// for a signal (`faulthandler.register`, made by steptrace/_common/stacks.py) writes it: raised on
// this thread, it runs here, before pthread_kill returns, and writes into the file registered.
// The program may take either back (close or reuse the descriptor, reset or handle the signal):
// each is checked against what was registered before the signal is raised (signal_taken_back).
int g_signal = 0, g_signal_fd = -1;
struct stat g_signal_file {};
struct sigaction g_signal_action {};

// Why the signal or the file registered are no longer steptrace's; nullptr while they are.
const char* signal_taken_back() {
  struct stat file {};
  if (::fstat(g_signal_fd, &file) != 0 || file.st_dev != g_signal_file.st_dev || file.st_ino != g_signal_file.st_ino) {
    return "the program closed the descriptor faulthandler writes them to, or opened another file under its number";
  }
  struct sigaction action {};
  if (::sigaction(g_signal, nullptr, &action) != 0 ||
      reinterpret_cast<void*>(action.sa_sigaction) != reinterpret_cast<void*>(g_signal_action.sa_sigaction) ||
      action.sa_flags != g_signal_action.sa_flags) {
    return "the program reset or took over the real-time signal faulthandler was registered on";
  }
  sigset_t blocked;
  if (::pthread_sigmask(SIG_BLOCK, nullptr, &blocked) != 0 || ::sigismember(&blocked, g_signal) == 1) {
    return "the real-time signal faulthandler was registered on is blocked on steptrace's thread";
  }
  return nullptr;
}

void dump_by_signal(int fd) {
  if (const char* why = signal_taken_back(); why != nullptr) {
    write_text(fd, "  not available: ");
    write_text(fd, why);
    write_text(fd, "\n");
    return;
  }
  if (::ftruncate(g_signal_fd, 0) != 0 || ::lseek(g_signal_fd, 0, SEEK_SET) != 0) return;
  if (::pthread_kill(::pthread_self(), g_signal) != 0) return;
  if (::lseek(g_signal_fd, 0, SEEK_SET) != 0) return;
  char buffer[8192];
  for (std::size_t copied = 0; copied < 64 * 1024;) {
    const ssize_t n = ::read(g_signal_fd, buffer, sizeof buffer);
    if (n <= 0) break;
    for (ssize_t at = 0; at < n;) {
      const ssize_t w = ::write(fd, buffer + at, static_cast<std::size_t>(n - at));
      if (w <= 0) return;
      at += w;
    }
    copied += static_cast<std::size_t>(n);
  }
}

void dump_stacks(int fd) {
  if (g_dump == nullptr && g_signal != 0) {
    dump_by_signal(fd);
    return;
  }
  if (g_dump == nullptr) {
    write_text(fd,
               "  not available: this Python neither exports _Py_DumpTracebackThreads nor has a signal for "
               "faulthandler\n");
    return;
  }
  if (const char* error = g_dump(fd, g_interpreter, nullptr); error != nullptr) {
    write_text(fd, "  not available: ");
    write_text(fd, error);
    write_text(fd, "\n");
  }
}

py::str text(const std::string& v) {
  PyObject* o = name_text(v);
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

py::dict rank_dict(const hang_rank& r) {
  py::dict d;
  d["rank"] = r.rank, d["step"] = r.step, d["phase"] = text(r.phase), d["open_s"] = r.open_s;
  if (r.has_collective) {
    d["group"] = text(r.group), d["kind"] = text(r.kind), d["seq"] = r.seq, d["in_collective"] = r.in_collective;
  }
  d["exited"] = r.exited;
  return d;
}

py::list rank_dicts(const std::vector<hang_rank>& ranks) {
  py::list out;
  for (const hang_rank& r : ranks) out.append(rank_dict(r));
  return out;
}

}  // namespace

void bind_hangs(py::module_& m) {
  g_dump = reinterpret_cast<dump_fn>(::dlsym(RTLD_DEFAULT, "_Py_DumpTracebackThreads"));
  g_interpreter = PyInterpreterState_Get();
  set_stack_writer(&dump_stacks);
  m.def("stacks_need_signal", [] { return g_dump == nullptr; });
  m.def(
      "set_stack_signal",       // faulthandler.register(signal, file=fd, all_threads=True) was made
      [](int signal, int fd) {  // what they are now is what the watch checks before raising it
        struct stat file {};
        struct sigaction action {};
        if (::fstat(fd, &file) != 0 || ::sigaction(signal, nullptr, &action) != 0) return false;
        g_signal_file = file;
        g_signal_action = action;
        g_signal_fd = fd;
        g_signal = signal;
        return true;
      },
      py::arg("signal"), py::arg("fd"));
  m.def(
      "collective_entered",
      [](std::string_view group, std::string_view kind) { return collective_entered(group, kind); }, py::arg("group"),
      py::arg("kind"));
  m.def(
      "collective_left", [](std::string_view group, std::uint64_t seq) { collective_left(group, seq); },
      py::arg("group"), py::arg("seq"));
  m.def(
      "window_hang",  // a dict, or None when the rows show no hang
      [](const std::vector<std::string>& rows,
         const std::vector<std::tuple<std::uint32_t, std::string, bool>>& gone) -> py::object {
        std::vector<gone_rank> g;
        for (const auto& [rank, row, exited] : gone) g.push_back({rank, row, exited});
        const job_hang h = window_hang(rows, g);
        if (!h.hang) return py::none();
        py::dict out;
        out["group"] = text(h.group), out["kind"] = text(h.kind), out["seq"] = h.seq;
        out["culprits"] = rank_dicts(h.culprits), out["waiting"] = rank_dicts(h.waiting);
        out["mismatched"] = rank_dicts(h.mismatched), out["gone"] = rank_dicts(h.gone);
        out["words"] = text(h.words);
        return std::move(out);
      },
      py::arg("rows"), py::arg("gone") = std::vector<std::tuple<std::uint32_t, std::string, bool>>{});
}

}  // namespace steptrace::bindings

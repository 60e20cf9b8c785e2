// torch's CUDA state as the phase table reads it, without importing torch. See torch_cuda.hpp.
#include "torch_cuda.hpp"

#include "glue.hpp"

namespace steptrace::bindings {
namespace {

PyObject* str_torch_cuda = nullptr;   // "torch.cuda"
PyObject* str_initialized = nullptr;  // "_initialized"
PyObject* str_torch_c = nullptr;      // "torch._C"
PyObject* str_get_device = nullptr;   // "_cuda_getDevice"
PyObject* str_raw_stream = nullptr;   // "_cuda_getCurrentRawStream"

}  // namespace

void intern_torch_names() {
  intern_all({{&str_torch_cuda, "torch.cuda"},
              {&str_initialized, "_initialized"},
              {&str_torch_c, "torch._C"},
              {&str_get_device, "_cuda_getDevice"},
              {&str_raw_stream, "_cuda_getCurrentRawStream"}});
}

// Whether torch may have initialised CUDA (then a phase defaults to torch's current stream,
// which the Python path finds): torch.cuda imported and its `_initialized` not false. Without
// that attribute (another torch) the Python path decides, as it always can.
int torch_cuda_may_be_on() {
  static PyObject* torch_cuda = nullptr;  // kept once imported: a module is never unloaded
  if (torch_cuda == nullptr) {
    PyObject* found = PyDict_GetItemWithError(PyImport_GetModuleDict(), str_torch_cuda);
    if (found == nullptr) return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(found);
    torch_cuda = found;
  }
  PyObject* on = PyObject_GetAttr(torch_cuda, str_initialized);
  if (on == nullptr) {
    PyErr_Clear();
    return 1;
  }
  const int truth = PyObject_IsTrue(on);
  Py_DECREF(on);
  return truth;
}

// torch's current CUDA stream on the current device, as the integer handle `phase()` times a
// phase on (the value of torch.cuda.current_stream().cuda_stream), from torch._C's two functions
// that give it without making a Stream object. False with no error set when they are not there
// or fail: the Python path then decides, as it always can.
bool torch_raw_stream(std::uintptr_t& handle) {
  PyObject* c = PyDict_GetItemWithError(PyImport_GetModuleDict(), str_torch_c);
  if (c == nullptr) {
    PyErr_Clear();
    return false;
  }
  PyObject* get_device = PyObject_GetAttr(c, str_get_device);
  PyObject* raw_stream = get_device ? PyObject_GetAttr(c, str_raw_stream) : nullptr;
  PyObject* device = raw_stream ? PyObject_CallNoArgs(get_device) : nullptr;
  PyObject* stream = device ? PyObject_CallOneArg(raw_stream, device) : nullptr;
  const bool ok = stream != nullptr && PyLong_CheckExact(stream);
  if (ok) handle = static_cast<std::uintptr_t>(PyLong_AsUnsignedLongLong(stream));
  Py_XDECREF(stream);
  Py_XDECREF(device);
  Py_XDECREF(raw_stream);
  Py_XDECREF(get_device);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return ok;
}

}  // namespace steptrace::bindings

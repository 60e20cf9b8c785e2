// torch's CUDA state as the phase table (phases.cpp) reads it on the hot path, from sys.modules:
// never an import, never a Stream object.
//
// Usage:
//   intern_torch_names();                     // once, when the module is made
//   int on = torch_cuda_may_be_on();          // -1: error set; 0: no; 1: maybe
//   std::uintptr_t s; if (torch_raw_stream(s)) ...  // torch's current stream's handle
#pragma once

#include <Python.h>

#include <cstdint>

namespace steptrace::bindings {

void intern_torch_names();

// Whether torch may have initialised CUDA (then a phase defaults to torch's current stream):
// torch.cuda imported and its `_initialized` not false; -1 with an error set.
int torch_cuda_may_be_on();

// torch's current CUDA stream on the current device, as an integer handle (the value of
// torch.cuda.current_stream().cuda_stream); false with no error set when torch._C cannot say.
bool torch_raw_stream(std::uintptr_t& handle);

}  // namespace steptrace::bindings

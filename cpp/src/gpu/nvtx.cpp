// NVTX ranges in the `steptrace` domain, for Nsight timelines (gpu/backend.hpp).
#include <nvtx3/nvToolsExt.h>

#include <cstdlib>

#include "gpu/backend.hpp"

namespace steptrace::detail {

std::atomic<bool> nvtx_enabled{false};

namespace {

// One registered NVTX string per phase id, made when first needed.
constexpr std::size_t max_phase_ids = 4096;
std::atomic<nvtxStringHandle_t> nvtx_names[max_phase_ids];

nvtxDomainHandle_t nvtx_domain() {
  static nvtxDomainHandle_t d = nvtxDomainCreateA("steptrace");
  return d;
}

thread_local std::uint32_t nvtx_depth = 0;

}  // namespace

bool nvtx_requested() noexcept { return std::getenv("NVTX_INJECTION64_PATH") != nullptr; }  // how Nsight attaches

void nvtx_push(std::uint32_t id) noexcept {
  if (id >= max_phase_ids) return;
  nvtxStringHandle_t name = nvtx_names[id].load(std::memory_order_relaxed);
  if (name == nullptr) {
    name = nvtxDomainRegisterStringA(nvtx_domain(), id == 0 ? "step" : phase_label(phase_id{id}).c_str());
    nvtx_names[id].store(name, std::memory_order_relaxed);
  }
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attr.message.registered = name;
  nvtxDomainRangePushEx(nvtx_domain(), &attr);
  ++nvtx_depth;
}

void nvtx_pop() noexcept {
  if (nvtx_depth == 0) return;
  --nvtx_depth;
  nvtxDomainRangePop(nvtx_domain());
}

}  // namespace steptrace::detail

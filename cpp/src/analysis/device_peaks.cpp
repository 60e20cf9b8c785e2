#include "analysis/device_peaks.hpp"

#include <array>
#include <cctype>

namespace steptrace::detail {
namespace {

struct row_match {
  std::array<const char*, 3> tokens;  // each given must appear in the name as a word
  device_peak peak;
};

const char* const nvidia_v100 = "NVIDIA Tesla V100 datasheet (2020)";
const char* const nvidia_a100 = "NVIDIA A100 Tensor Core GPU datasheet (2021), dense";
const char* const nvidia_h100 = "NVIDIA H100 Tensor Core GPU datasheet (2023), sparse figures halved";
const char* const nvidia_h200 = "NVIDIA H200 Tensor Core GPU datasheet (2024), sparse figures halved";
const char* const nvidia_gh200 = "NVIDIA GH200 Grace Hopper Superchip datasheet (2023), HBM3 96 GB";
const char* const nvidia_hgx_b = "NVIDIA HGX B200/B300 datasheets (2025), per GPU, sparse figures halved";
const char* const amd_mi200 = "AMD Instinct MI200 series datasheets (2021), matrix peaks";
const char* const amd_mi300 = "AMD Instinct MI300X/MI325X datasheets (2024), dense";
const char* const amd_mi355 = "AMD Instinct MI355X datasheet (2025), dense";

// clang-format off
const std::vector<row_match>& rows() {
  static const std::vector<row_match> table = {
      //  tokens                   name             fp32   tf32    bf16    fp16    fp8     GB/s
      {{"GH200"},            {"GH200",          67.0, 494.5,  989.5,  989.5, 1979.0, 4000, nvidia_gh200}},
      {{"H200"},             {"H200",           67.0, 494.5,  989.5,  989.5, 1979.0, 4800, nvidia_h200}},
      {{"H100", "PCIe"},     {"H100 PCIe",      51.0, 378.0,  756.5,  756.5, 1513.0, 2000, nvidia_h100}},
      {{"H100", "NVL"},      {"H100 NVL",       60.0, 417.5,  835.5,  835.5, 1670.5, 3900, nvidia_h100}},
      {{"H100"},             {"H100 SXM",       67.0, 494.5,  989.5,  989.5, 1979.0, 3350, nvidia_h100}},
      {{"B300"},             {"B300",           75.0, 1125.0, 2250.0, 2250.0, 4500.0, 8000, nvidia_hgx_b}},
      {{"B200"},             {"B200",           75.0, 1125.0, 2250.0, 2250.0, 4500.0, 8000, nvidia_hgx_b}},
      {{"A100", "80GB", "PCIe"}, {"A100 80GB PCIe", 19.5, 156.0, 312.0, 312.0, 0, 1935, nvidia_a100}},
      {{"A100", "80GB"},     {"A100 80GB SXM",  19.5, 156.0,  312.0,  312.0,    0, 2039, nvidia_a100}},
      {{"A100"},             {"A100 40GB",      19.5, 156.0,  312.0,  312.0,    0, 1555, nvidia_a100}},
      {{"A10"},              {"A10",            31.2,  62.5,  125.0,  125.0,    0,  600, "NVIDIA A10 datasheet (2021), dense"}},
      {{"L4"},               {"L4",             30.3,  60.0,  121.0,  121.0,  242.0, 300, "NVIDIA L4 datasheet (2023), sparse figures halved"}},
      {{"T4"},               {"T4",              8.1,     0,      0,   65.0,    0,  320, "NVIDIA T4 datasheet (2019)"}},
      {{"V100", "PCIe"},     {"V100 PCIe",      14.0,     0,      0,  112.0,    0,  900, nvidia_v100}},
      {{"V100"},             {"V100 SXM2",      15.7,     0,      0,  125.0,    0,  900, nvidia_v100}},
      {{"MI250X"},           {"MI250X",         95.7,     0,  383.0,  383.0,    0, 3277, amd_mi200}},
      {{"MI250"},            {"MI250",          90.5,     0,  362.1,  362.1,    0, 3277, amd_mi200}},
      {{"MI300X"},           {"MI300X",        163.4, 653.7, 1307.4, 1307.4, 2614.9, 5300, amd_mi300}},
      {{"MI325X"},           {"MI325X",        163.4, 653.7, 1307.4, 1307.4, 2614.9, 6000, amd_mi300}},
      {{"MI355X"},           {"MI355X",        157.3,     0, 2516.6, 2516.6, 5033.2, 8000, amd_mi355}},
  };
  return table;
}
// clang-format on

bool alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// `token` in `name` as a word of its own (case aside): "A10" is in "NVIDIA A10", not in "A100".
bool has_word(std::string_view name, std::string_view token) {
  for (std::size_t at = 0; at + token.size() <= name.size(); ++at) {
    bool same = true;
    for (std::size_t i = 0; same && i < token.size(); ++i) {
      same =
          std::tolower(static_cast<unsigned char>(name[at + i])) == std::tolower(static_cast<unsigned char>(token[i]));
    }
    if (same && (at == 0 || !alnum(name[at - 1])) &&
        (at + token.size() == name.size() || !alnum(name[at + token.size()]))) {
      return true;
    }
  }
  return false;
}

}  // namespace

const char* dtype_name(dtype_class d) {
  switch (d) {
    case dtype_class::fp64:
      return "fp64";
    case dtype_class::fp32:
      return "fp32";
    case dtype_class::tf32:
      return "tf32";
    case dtype_class::bf16:
      return "bf16";
    case dtype_class::fp16:
      return "fp16";
    case dtype_class::fp8:
      return "fp8";
    case dtype_class::int8:
      return "int8";
    case dtype_class::unknown:
      break;
  }
  return "?";
}

dtype_class dtype_named(std::string_view name) {
  for (dtype_class d : {dtype_class::fp64, dtype_class::fp32, dtype_class::tf32, dtype_class::bf16, dtype_class::fp16,
                        dtype_class::fp8, dtype_class::int8}) {
    if (name == dtype_name(d)) return d;
  }
  return dtype_class::unknown;
}

const std::vector<device_peak>& device_peaks() {
  static const std::vector<device_peak> out = [] {
    std::vector<device_peak> v;
    for (const row_match& r : rows()) v.push_back(r.peak);
    return v;
  }();
  return out;
}

const device_peak* find_device(std::string_view gpu_name) {
  const auto& table = rows();
  for (std::size_t i = 0; i < table.size(); ++i) {
    bool all = true;
    for (const char* t : table[i].tokens) all = all && (t == nullptr || has_word(gpu_name, t));
    if (all) return &device_peaks()[i];
  }
  return nullptr;
}

double peak_tflops(const device_peak& d, dtype_class t) {
  switch (t) {
    case dtype_class::fp32:
      return d.fp32;
    case dtype_class::tf32:
      return d.tf32 > 0 ? d.tf32 : d.fp32;
    case dtype_class::bf16:
      return d.bf16 > 0 ? d.bf16 : d.fp32;
    case dtype_class::fp16:
      return d.fp16 > 0 ? d.fp16 : d.fp32;
    case dtype_class::fp8:
      return d.fp8 > 0 ? d.fp8 : peak_tflops(d, dtype_class::bf16);
    default:
      return 0;
  }
}

}  // namespace steptrace::detail

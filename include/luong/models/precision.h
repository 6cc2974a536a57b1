#pragma once
// Mixed precision for training: matrix products in bfloat16 with float32 master weights, float32
// accumulation inside each product, and the loss, softmax and recurrent gate arithmetic in float32.
// The module path gets it from LibTorch's autocast; the fused CPU kernels read the same thread-local
// state (bf16_products) and run their own products in bf16, so one guard covers both.
#include <c10/core/Device.h>

#include <utility>

#include "luong/util/options.h"

namespace luong::models {

enum class Precision { kFloat32, kBFloat16 };

/// For its scope, autocast to bf16 on `device` (LibTorch's, as torch.autocast(device, bfloat16)):
/// nothing for float32. Restores the state it found, and clears autocast's weight cache on leaving
/// the outermost one.
class PrecisionGuard {
 public:
  PrecisionGuard(const c10::Device& device, Precision precision);
  ~PrecisionGuard();
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_type_ = c10::DeviceType::CPU;
  bool was_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::BFloat16;
};

/// Whether the calling thread runs matrix products on `device` in bf16 (a bf16 PrecisionGuard, or
/// autocast to bf16 set by other means, is in force).
bool bf16_products(const c10::Device& device);

/// Whether this CPU multiplies bf16 matrices natively (AVX512-BF16 or AMX); elsewhere LibTorch
/// converts them and bf16 is slower than float32.
bool cpu_has_native_bf16();

}  // namespace luong::models

template <>
struct luong::options::EnumNames<luong::models::Precision> {
  static constexpr std::pair<luong::models::Precision, const char*> values[] = {
      {luong::models::Precision::kFloat32, "float32"}, {luong::models::Precision::kBFloat16, "bf16"}};
};

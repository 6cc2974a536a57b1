#include "luong/models/precision.h"

#include <ATen/autocast_mode.h>

namespace luong::models {

PrecisionGuard::PrecisionGuard(const c10::Device& device, Precision precision) {
  if (precision != Precision::kBFloat16) return;
  active_ = true;
  device_type_ = device.type();
  was_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_, at::kBFloat16);
  at::autocast::increment_nesting();
}

PrecisionGuard::~PrecisionGuard() {
  if (!active_) return;
  // The cast weights are cached for the scope (as torch.autocast does), and dropped with it.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
  at::autocast::set_autocast_enabled(device_type_, was_enabled_);
}

bool bf16_products(const c10::Device& device) {
  return at::autocast::is_autocast_enabled(device.type()) &&
         at::autocast::get_autocast_dtype(device.type()) == at::kBFloat16;
}

bool cpu_has_native_bf16() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
#else
  return false;
#endif
}

}  // namespace luong::models

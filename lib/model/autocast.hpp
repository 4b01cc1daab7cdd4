// bf16 mixed precision for a scope: torch.autocast's rules on one device type, as an RAII guard.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace ppctl::model {

/// While alive and `enabled`, operations on `device_type` tensors run under autocast to bfloat16:
/// matrix products and attention in bf16, reductions, norms and losses in fp32, exactly as inside
/// Python's `torch.autocast(device_type, dtype=torch.bfloat16)`. Parameters stay fp32 (the master
/// weights) and so do their gradients. Restores the previous autocast state on destruction and
/// clears autocast's cast cache when the outermost guard ends. Disabled: does nothing.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device_type, bool enabled);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_type_;
  bool enabled_;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::BFloat16;
};

}  // namespace ppctl::model

// AutocastGuard: sets and restores ATen's thread-local autocast state for one device type.
#include "model/autocast.hpp"

#include <ATen/autocast_mode.h>

namespace ppctl::model {

AutocastGuard::AutocastGuard(c10::DeviceType device_type, bool enabled)
    : device_type_(device_type), enabled_(enabled) {
  if (!enabled_) return;
  previous_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_, c10::ScalarType::BFloat16);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
}

}  // namespace ppctl::model

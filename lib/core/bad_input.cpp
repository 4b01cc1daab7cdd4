// Which errors are bad input (see bad_input.hpp).
#include "core/bad_input.hpp"

namespace ppctl {

bool is_bad_input(const std::exception& e) {
  return dynamic_cast<const ConfigError*>(&e) != nullptr || dynamic_cast<const PlanError*>(&e) != nullptr ||
         dynamic_cast<const ScheduleError*>(&e) != nullptr ||
         dynamic_cast<const CheckpointError*>(&e) != nullptr || dynamic_cast<const DataError*>(&e) != nullptr ||
         dynamic_cast<const AddressError*>(&e) != nullptr;
}

}  // namespace ppctl

#pragma once
// The device report of `gputrain info`, as text and as one JSON object.
#include <string>

#include "gputrain/device/inventory.h"

namespace gputrain::device {

std::string format_inventory(const DeviceInventory& inventory);
std::string inventory_json(const DeviceInventory& inventory);

}  // namespace gputrain::device

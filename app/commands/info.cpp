#include <iostream>

#include "commands.h"
#include "gputrain/device/inventory_report.h"
#include "gputrain/device/probe.h"

namespace gputrain::app {

int run_info(const InfoArgs& args) {
  const device::DeviceInventory inventory = device::probe_devices(args.env.cuda_visible_devices);
  std::cout << (args.json ? device::inventory_json(inventory) : device::format_inventory(inventory));
  return 0;
}

}  // namespace gputrain::app

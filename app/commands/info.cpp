#include <iostream>

#include "commands.h"
#include "gputrain/device/probe.h"
#include "gputrain/device/report.h"

namespace gputrain::app {

int run_info(const InfoArgs& args) {
  const device::DeviceInventory inventory = device::probe_devices(args.env.cuda_visible_devices);
  std::cout << (args.json ? device::report_json(inventory) : device::format_report(inventory));
  return 0;
}

}  // namespace gputrain::app

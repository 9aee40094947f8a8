#include <gtest/gtest.h>

#include "gputrain/common/error.h"
#include "gputrain/device/device_spec.h"
#include "gputrain/device/inventory.h"

namespace gputrain::device {
namespace {

TEST(VisibleDevices, UnsetMeansIdentity) {
  EXPECT_EQ(visible_physical_ids(std::nullopt, 3), (std::vector<std::string>{"0", "1", "2"}));
}

TEST(VisibleDevices, MaskMapsLogicalToPhysical) {
  EXPECT_EQ(visible_physical_ids(std::string("2,3"), 2), (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(visible_physical_ids(std::string(" 3 , 1"), 2), (std::vector<std::string>{"3", "1"}));
  EXPECT_EQ(visible_physical_ids(std::string("GPU-8f3a,1"), 2), (std::vector<std::string>{"GPU-8f3a", "1"}));
}

TEST(VisibleDevices, FirstInvalidEntryEndsTheList) {
  EXPECT_EQ(visible_physical_ids(std::string("0,-1,2"), 1), (std::vector<std::string>{"0"}));
  EXPECT_TRUE(visible_physical_ids(std::string(""), 0).empty());
  EXPECT_TRUE(visible_physical_ids(std::string("-1"), 0).empty());
}

TEST(CudaVersion, DecodesCudaEncoding) {
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12040), "12.4");
  EXPECT_EQ(cuda_version_string(0), "");
}

TEST(DeviceSpec, ParsesEveryForm) {
  EXPECT_EQ(DeviceSpec::parse("auto").kind, DeviceKind::kAuto);
  EXPECT_EQ(DeviceSpec::parse("cpu").kind, DeviceKind::kCpu);
  EXPECT_EQ(DeviceSpec::parse("mps").kind, DeviceKind::kMps);
  EXPECT_FALSE(DeviceSpec::parse("cuda").index.has_value());
  EXPECT_EQ(DeviceSpec::parse("cuda:3").index, 3);
  EXPECT_THROW(DeviceSpec::parse("cuda:"), UserError);
  EXPECT_THROW(DeviceSpec::parse("cuda:x"), UserError);
  EXPECT_THROW(DeviceSpec::parse("tpu"), UserError);
}

}  // namespace
}  // namespace gputrain::device

#include <gtest/gtest.h>

#include "gputrain/common/error.h"
#include "gputrain/device/inventory.h"
#include "gputrain/device/nvml.h"
#include "support/paths.h"

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

}  // namespace
}  // namespace gputrain::device

namespace gputrain::device {
namespace {

TEST(CudaUnavailable, EmptyVisibleDevicesIsSaidPlainly) {
  CudaStartFacts facts;
  facts.cuda_visible_devices = " ";
  facts.driver = DriverInfo{"580.65.06", 13000};
  EXPECT_EQ(explain_cuda_unavailable(facts),
            "CUDA_VISIBLE_DEVICES is set but empty: no GPUs visible (unset it, or list the GPUs to use)");
}

TEST(CudaUnavailable, OldDriverNamesItsVersionAndWhatIsNeeded) {
  CudaStartFacts facts;
  facts.driver = DriverInfo{"535.104.05", 12020};
  facts.build_version = 13000;
  facts.error = "CUDA driver version is insufficient for CUDA runtime version";
  const std::string why = explain_cuda_unavailable(facts);
  EXPECT_NE(why.find("NVIDIA driver 535.104.05 runs CUDA 12.2 at most"), std::string::npos) << why;
  EXPECT_NE(why.find("built for CUDA 13.0, which needs an R580 driver or newer"), std::string::npos) << why;
}

TEST(CudaUnavailable, NoDriverAndOtherFailures) {
  CudaStartFacts facts;
  facts.build_version = 13000;
  EXPECT_EQ(explain_cuda_unavailable(facts), "no NVIDIA driver was found on this machine");
  facts.error =
      "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver";
  EXPECT_EQ(explain_cuda_unavailable(facts), "no NVIDIA driver was found on this machine");
  facts.driver = DriverInfo{"580.65.06", 13000};
  facts.error = "CUDA-capable device(s) is/are busy or unavailable";
  EXPECT_EQ(explain_cuda_unavailable(facts),
            "the NVIDIA driver 580.65.06 is installed but CUDA could not start: "
            "CUDA-capable device(s) is/are busy or unavailable");
}

TEST(Nvml, ReadsTheDriverFromTheLibrary) {
  NvmlLibrary nvml(testing::kFakeNvmlPath);
  ASSERT_TRUE(nvml.ok()) << nvml.reason();
  const auto driver = read_driver(nvml);
  ASSERT_TRUE(driver.has_value());
  EXPECT_EQ(driver->version, "535.104.05");
  EXPECT_EQ(driver->cuda_version, 12020);
  EXPECT_EQ(free_memory(nvml, "00000000:01:00.0"), int64_t{6} << 30);  // 8 GiB total, 2 GiB used
  EXPECT_FALSE(free_memory(nvml, "not a bus id").has_value());
}

TEST(Nvml, MissingLibraryIsNotAnError) {
  NvmlLibrary nvml("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(nvml.ok());
  EXPECT_NE(nvml.reason().find("could not be loaded"), std::string::npos);
  EXPECT_FALSE(read_driver(nvml).has_value());
}

}  // namespace
}  // namespace gputrain::device

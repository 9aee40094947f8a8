// nvJPEG is found and bound at run time, or refused with every place tried.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "images/nvjpeg_library.h"

namespace gputrain::data::detail {
namespace {

TEST(NvjpegLibrary, MissingFilesAreNamedWithTheFix) {
  const NvjpegLibrary lib = load_nvjpeg({"/nonexistent/libnvjpeg.so.13", "libnvjpeg-missing.so.13"});
  EXPECT_FALSE(lib.loaded());
  EXPECT_TRUE(lib.path.empty());
  if (nvjpeg_built()) {
    EXPECT_NE(lib.why_not.find("/nonexistent/libnvjpeg.so.13"), std::string::npos) << lib.why_not;
    EXPECT_NE(lib.why_not.find("libnvjpeg-missing.so.13"), std::string::npos) << lib.why_not;
    EXPECT_NE(lib.why_not.find("pip install nvidia-nvjpeg"), std::string::npos) << lib.why_not;
  } else {
    EXPECT_NE(lib.why_not.find("no CUDA"), std::string::npos) << lib.why_not;
  }
}

// A library that loads but is not nvJPEG (libc) is passed over, and said why.
TEST(NvjpegLibrary, ALibraryWithoutTheEntryPointsIsPassedOver) {
  const NvjpegLibrary lib = load_nvjpeg({"libc.so.6"});
  EXPECT_FALSE(lib.loaded());
  const std::string expected = nvjpeg_built() ? "libc.so.6 has no nvjpegGetProperty" : "no CUDA";
  EXPECT_NE(lib.why_not.find(expected), std::string::npos) << lib.why_not;
}

// scripts/setup.sh installs the nvidia-nvjpeg wheel beside the torch wheel's
// NVIDIA libraries: the first place searched, and the one loaded (by its
// full path, not a second copy from elsewhere).
TEST(NvjpegLibrary, LoadsTheWheelBesideLibTorch) {
  const NvjpegLibrary& lib = nvjpeg_library();
  if (!nvjpeg_built()) {
    EXPECT_NE(lib.why_not.find("no CUDA"), std::string::npos) << lib.why_not;
    return;
  }
  const std::vector<std::string> paths = nvjpeg_search_paths();
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_NE(paths[0].find("/nvidia/cu13/lib/libnvjpeg.so.13"), std::string::npos) << paths[0];
  EXPECT_EQ(paths[1], "libnvjpeg.so.13");
  ASSERT_TRUE(lib.loaded()) << lib.why_not;
  EXPECT_EQ(lib.path, paths[0]);
  EXPECT_EQ(lib.version.rfind("13.", 0), 0u) << lib.version;
}

}  // namespace
}  // namespace gputrain::data::detail

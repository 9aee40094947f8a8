// Where LibTorch and the CUDA driver keep the kernels they compile at run
// time, resolved from the environment as they resolve it, and why one is not
// kept across runs.
#include "gputrain/device/kernel_caches.h"

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace gputrain::device {
namespace {

using testing::TempDir;
using testing::write_text;

KernelCacheEnv home_at(const std::filesystem::path& home) {
  KernelCacheEnv env;
  env.home = home.string();
  return env;
}

TEST(KernelCaches, UnderHomeBothAreKeptWhereLibTorchAndCudaPutThem) {
  TempDir home;
  const std::vector<KernelCache> caches = kernel_caches(home_at(home.path()));
  ASSERT_EQ(caches.size(), 2u);
  EXPECT_EQ(caches[0].dir, home.path() / ".cache" / "torch" / "kernels");
  EXPECT_EQ(caches[1].dir, home.path() / ".nv" / "ComputeCache");
  EXPECT_EQ(caches[0].not_kept, "");
  EXPECT_EQ(caches[1].not_kept, "");
  EXPECT_EQ(describe_kept(caches), "kernel caches (kept across runs): the kernels LibTorch compiles with NVRTC in " +
                                       caches[0].dir.string() + "; the kernels CUDA compiles from PTX in " +
                                       caches[1].dir.string());
}

TEST(KernelCaches, TheirOwnVariablesWinOverXdgCacheHomeWhichWinsOverHome) {
  TempDir home, xdg, torch_dir, cuda_dir;
  KernelCacheEnv env = home_at(home.path());
  env.xdg_cache_home = xdg.path().string();
  EXPECT_EQ(kernel_caches(env)[0].dir, xdg.path() / "torch" / "kernels");
  EXPECT_EQ(kernel_caches(env)[1].dir, home.path() / ".nv" / "ComputeCache") << "CUDA does not read XDG_CACHE_HOME";
  env.pytorch_kernel_cache_path = torch_dir.path().string();
  env.cuda_cache_path = cuda_dir.path().string();
  const std::vector<KernelCache> caches = kernel_caches(env);
  EXPECT_EQ(caches[0].dir, torch_dir.path());
  EXPECT_EQ(caches[1].dir, cuda_dir.path());
  EXPECT_EQ(caches[0].not_kept + caches[1].not_kept, "");
  // A relative directory that does not exist yet is made in the working directory, which can hold it.
  env.cuda_cache_path = "kernel-cache-not-made-yet";
  EXPECT_EQ(kernel_caches(env)[1].not_kept, "");
}

TEST(KernelCaches, TurnedOffByTheirVariablesTheyAreNotKeptAndTheVariableIsNamed) {
  TempDir home;
  KernelCacheEnv env = home_at(home.path());
  env.use_pytorch_kernel_cache = "0";
  env.cuda_cache_disable = "1";
  const std::vector<KernelCache> caches = kernel_caches(env);
  EXPECT_EQ(caches[0].not_kept, "USE_PYTORCH_KERNEL_CACHE=0 turns their cache off; unset it");
  EXPECT_EQ(caches[1].not_kept, "CUDA_CACHE_DISABLE=1 turns their cache off; unset it");
  EXPECT_EQ(describe_kept(caches), "");
  env.use_pytorch_kernel_cache = "1";  // LibTorch: any value but 0 keeps it on
  EXPECT_EQ(kernel_caches(env)[0].not_kept, "");
}

TEST(KernelCaches, ADirectoryThatCannotBeMadeOrAMissingHomeSaysWhichVariableToSet) {
  TempDir dir;
  const std::filesystem::path file = dir.path() / "a_file";
  write_text(file, "x");
  // HOME is a regular file: nothing can be made under it, even by root.
  const std::vector<KernelCache> under_file = kernel_caches(home_at(file));
  EXPECT_NE(under_file[0].not_kept.find("is not a writable directory and cannot be made one; point "
                                        "PYTORCH_KERNEL_CACHE_PATH at one"),
            std::string::npos)
      << under_file[0].not_kept;
  EXPECT_NE(under_file[1].not_kept.find("point CUDA_CACHE_PATH at one"), std::string::npos) << under_file[1].not_kept;

  // LibTorch does not create PYTORCH_KERNEL_CACHE_PATH itself.
  KernelCacheEnv missing = home_at(dir.path());
  missing.pytorch_kernel_cache_path = (dir.path() / "not_yet").string();
  EXPECT_EQ(kernel_caches(missing)[0].not_kept,
            "PYTORCH_KERNEL_CACHE_PATH=" + (dir.path() / "not_yet").string() +
                " is not a writable directory (LibTorch does not make it); create it or point the variable at one");

  const std::vector<KernelCache> nothing = kernel_caches(KernelCacheEnv{});
  EXPECT_EQ(nothing[0].not_kept, "neither HOME nor PYTORCH_KERNEL_CACHE_PATH is set; set one to a writable directory");
  EXPECT_EQ(nothing[1].not_kept, "neither HOME nor CUDA_CACHE_PATH is set; set one to a writable directory");
}

}  // namespace
}  // namespace gputrain::device

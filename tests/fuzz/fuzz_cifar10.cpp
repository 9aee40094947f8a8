// libFuzzer target: the CIFAR-10 binary reader. The input is the test split's
// one file, test_batch.bin (the training files go through the same code).
#include "fuzz_data.h"
#include "support/temp_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const gputrain::testing::TempDir root("gputrain-fuzz-cifar10");
  gputrain::fuzz::write_file(root / "test_batch.bin", data, size);
  gputrain::fuzz::load_or_data_error(gputrain::config::DatasetName::kCifar10, root.path());
  return 0;
}

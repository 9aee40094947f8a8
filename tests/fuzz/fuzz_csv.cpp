// libFuzzer target: the csv reader. The input is a big-endian uint16 n, then
// n bytes of train.csv, then test.csv (the rest); the test split is loaded,
// which reads both files (labels are numbered over the two).
#include <algorithm>

#include "fuzz_data.h"
#include "support/temp_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const gputrain::testing::TempDir root("gputrain-fuzz-csv");
  if (size < 2) return 0;
  const std::size_t train = std::min<std::size_t>(size - 2, (std::size_t{data[0]} << 8) | data[1]);
  gputrain::fuzz::write_file(root / "train.csv", data + 2, train);
  gputrain::fuzz::write_file(root / "test.csv", data + 2 + train, size - 2 - train);
  gputrain::fuzz::load_or_data_error(gputrain::config::DatasetName::kCsv, root.path());
  return 0;
}

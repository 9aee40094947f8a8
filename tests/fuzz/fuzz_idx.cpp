// libFuzzer target: the IDX reader (MNIST, Fashion-MNIST), raw or gzip. The
// input is a big-endian uint32 n, then n bytes of the images file, then the
// labels file (the rest). zlib recognises gzip by its content, so one name
// per file serves both encodings.
#include <algorithm>

#include "fuzz_data.h"
#include "support/temp_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const gputrain::testing::TempDir root("gputrain-fuzz-idx");
  if (size < 4) return 0;
  const std::size_t images =
      std::min<std::size_t>(size - 4, (std::size_t{data[0]} << 24) | (data[1] << 16) | (data[2] << 8) | data[3]);
  gputrain::fuzz::write_file(root / "t10k-images-idx3-ubyte", data + 4, images);
  gputrain::fuzz::write_file(root / "t10k-labels-idx1-ubyte", data + 4 + images, size - 4 - images);
  gputrain::fuzz::load_or_data_error(gputrain::config::DatasetName::kMnist, root.path());
  return 0;
}

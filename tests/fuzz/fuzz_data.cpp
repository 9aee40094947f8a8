#include "fuzz_data.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "gputrain/common/error.h"
#include "gputrain/data/dataset.h"

namespace gputrain::fuzz {

namespace {
[[noreturn]] void fail(const std::string& problem) {
  std::fprintf(stderr, "fuzz: %s\n", problem.c_str());
  std::abort();
}
}  // namespace

void write_file(const std::filesystem::path& file, const uint8_t* data, std::size_t size) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out.flush()) fail("cannot write " + file.string());
}

void load_or_data_error(config::DatasetName dataset, const std::filesystem::path& root) {
  config::DataConfig config;
  config.dataset = dataset;
  config.root = root.string();
  std::shared_ptr<const data::Dataset> set;
  try {
    set = data::make_dataset(config, data::Split::kTest, 0);
  } catch (const DataError&) {
    return;
  }
  const data::DatasetInfo& info = set->info();
  const torch::Tensor& inputs = set->inputs();
  const torch::Tensor& targets = set->targets();
  std::vector<int64_t> shape{info.samples};
  shape.insert(shape.end(), info.input_shape.begin(), info.input_shape.end());
  if (info.samples < 1 || inputs.sizes() != torch::IntArrayRef(shape)) {
    fail("the data set's inputs disagree with its info");
  }
  if (info.target_kind == data::TargetKind::kValues) {  // csv regression: [N, targets] float32
    if (targets.sizes() != torch::IntArrayRef({info.samples, info.targets}) || !targets.isfinite().all().item<bool>()) {
      fail("the regression targets disagree with the data set's info");
    }
    return;
  }
  if (targets.dim() != 1 || targets.size(0) != info.samples) fail("the labels disagree with the data set's info");
  if (targets.min().item<int64_t>() < 0 || targets.max().item<int64_t>() >= info.classes) {
    fail("a label is outside 0..classes-1");
  }
}

}  // namespace gputrain::fuzz

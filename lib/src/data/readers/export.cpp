#include "gputrain/data/export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "images/image_files.h"
#include "readers/formats.h"

namespace gputrain::data {

namespace {

// NumPy's type string of a dtype; the byte order of the host (little-endian
// on every platform LibTorch ships for).
std::string npy_descr(torch::ScalarType type) {
  switch (type) {
    case torch::kUInt8:
      return "|u1";
    case torch::kFloat32:
      return "<f4";
    case torch::kInt64:
      return "<i8";
    case torch::kInt32:
      return "<i4";
    case torch::kFloat64:
      return "<f8";
    default:
      break;
  }
  throw InternalError(fmt::format("write_npy: no .npy type for {}", c10::toString(type)));
}

}  // namespace

void write_npy(const std::filesystem::path& file, const torch::Tensor& tensor) {
  GPUTRAIN_CHECK(tensor.is_contiguous() && tensor.device().is_cpu(), "write_npy needs a contiguous CPU tensor");
  const std::vector<int64_t> sizes = tensor.sizes().vec();
  const std::string shape =
      sizes.size() == 1 ? fmt::format("({},)", sizes[0]) : fmt::format("({})", fmt::join(sizes, ", "));
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", npy_descr(tensor.scalar_type()), shape);
  // Magic (6) + version (2) + header length (2) + header, padded with spaces
  // and a newline to a multiple of 64 bytes, as format 1.0 asks.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  const auto length = static_cast<uint16_t>(header.size());
  const char preamble[10] = {
      '\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<char>(length & 0xff), static_cast<char>(length >> 8)};
  write_atomically_in_pieces(file, [&](const ByteSink& sink) {
    sink(std::string_view(preamble, sizeof preamble));
    sink(header);
    sink(std::string_view(static_cast<const char*>(tensor.const_data_ptr()), tensor.nbytes()));
  });
}

namespace {

// A data set's files as the readers name them, and what to call that kind.
struct SetKind {
  const char* what;
  std::vector<std::string> files;  // any one of them shows the kind
};

std::vector<SetKind> set_kinds() {
  std::vector<std::string> cifar(detail::kCifarTrainFiles.begin(), detail::kCifarTrainFiles.end());
  cifar.emplace_back(detail::kCifarTestFile);
  std::vector<std::string> idx;
  for (const Split split : {Split::kTrain, Split::kTest}) {
    for (const char* name : {detail::idx_names(split).images, detail::idx_names(split).labels}) {
      idx.insert(idx.end(), {name, std::string(name) + ".gz"});
    }
  }
  return {{".npy arrays", {"train_inputs.npy", "train_targets.npy", "test_inputs.npy", "test_targets.npy"}},
          {"an image folder", {"train", "test"}},
          {"IDX files", idx},
          {"CIFAR-10 binary files", cifar},
          {"csv tables", {"train.csv", "test.csv"}}};
}

}  // namespace

void check_export_out(const std::filesystem::path& dir, bool images, bool overwrite) {
  if (dir.empty()) throw UserError("datasets export: --out is empty; name the directory to write");
  const std::string written = images ? "an image folder" : ".npy arrays";
  for (const SetKind& kind : set_kinds()) {
    for (const std::string& name : kind.files) {
      std::error_code error;
      if (!std::filesystem::exists(dir / name, error)) continue;
      if (kind.what != written) {
        throw UserError(
            fmt::format("datasets export: {}: holds another data set ({}: {}); the export ({}) would be a second "
                        "set beside it, --force or not: choose another --out",
                        dir.string(), kind.what, name, written));
      }
      if (!overwrite) {
        throw UserError(fmt::format(
            "datasets export: {}: holds a data set already ({}); add --force to overwrite it, or choose another --out",
            dir.string(), name));
      }
    }
  }
}

void export_npy(const Dataset& dataset, const std::filesystem::path& dir, Split split) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw DataError(fmt::format("cannot create {}: {}", dir.string(), error.message()));
  const std::string prefix = split == Split::kTrain ? "train" : "test";
  write_npy(dir / (prefix + "_inputs.npy"), dataset.inputs());
  if (dataset.targets().defined()) {
    write_npy(dir / (prefix + "_targets.npy"), dataset.targets());
  } else {
    std::filesystem::remove(dir / (prefix + "_targets.npy"), error);  // an overwritten set's labels are not these
  }
}

void export_images(const Dataset& dataset, const std::filesystem::path& dir, Split split, ImageFormat format,
                   int jpeg_quality, bool overwrite) {
  namespace fs = std::filesystem;
  const DatasetInfo& info = dataset.info();
  if (!info.images || info.target_kind != TargetKind::kClasses) {
    throw DataError(fmt::format("datasets export: {} holds no labelled images; write it with --format npy", info.name));
  }
  const std::vector<int64_t>& s = info.input_shape;
  const detail::ImageShape shape{s.at(0), s.at(1), s.at(2)};
  if (shape.channels != 1 && shape.channels != 3) {
    throw DataError(fmt::format("datasets export: {}'s images have {} channels; PNG and JPEG hold 1 or 3", info.name,
                                shape.channels));
  }
  const std::string split_name = split == Split::kTrain ? "train" : "test";
  const fs::path target = dir / split_name;
  std::error_code error;
  if (!overwrite && fs::exists(target, error)) {
    throw DataError(fmt::format("datasets export: {} exists; remove it or give another --out", target.string()));
  }
  const fs::path partial = dir / fmt::format(".{}.partial-{}", split_name, ::getpid());
  fs::remove_all(partial, error);
  const auto digits = [](int64_t n) { return std::to_string(std::max<int64_t>(n - 1, 0)).size(); };
  // The names as folders only where image_folder reads them back in label
  // order: sorted, one path component each (Fashion-MNIST's are neither).
  const bool folders = std::is_sorted(info.class_names.begin(), info.class_names.end()) &&
                       std::none_of(info.class_names.begin(), info.class_names.end(),
                                    [](const std::string& n) { return n.find('/') != std::string::npos; });
  std::vector<std::string> classes = folders ? info.class_names : std::vector<std::string>{};
  for (int64_t c = static_cast<int64_t>(classes.size()); c < info.classes; ++c) {
    classes.push_back(fmt::format("{:0{}}", c, digits(info.classes)));
  }
  for (const std::string& name : classes) {
    fs::create_directories(partial / name, error);
    if (error) throw DataError(fmt::format("cannot create {}: {}", (partial / name).string(), error.message()));
  }
  const char* extension = format == ImageFormat::kPng ? ".png" : ".jpg";
  const int64_t* labels = dataset.targets().const_data_ptr<int64_t>();
  std::vector<uint8_t> pixels(static_cast<std::size_t>(shape.bytes()));
  try {
    for (int64_t i = 0; i < info.samples; ++i) {
      dataset.read_image(i, pixels.data());
      const std::string bytes = format == ImageFormat::kPng ? detail::encode_png(pixels.data(), shape)
                                                            : detail::encode_jpeg(pixels.data(), shape, jpeg_quality);
      const fs::path file = partial / classes.at(static_cast<std::size_t>(labels[i])) /
                            fmt::format("{:0{}}{}", i, digits(info.samples), extension);
      std::ofstream out(file, std::ios::binary);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!out.flush()) throw UserError(fmt::format("cannot write {}: {}", file.string(), std::strerror(errno)));
    }
  } catch (...) {
    fs::remove_all(partial, error);
    throw;
  }
  if (overwrite) fs::remove_all(target, error);  // rename does not replace a folder that holds files
  fs::rename(partial, target, error);
  if (error)
    throw DataError(fmt::format("cannot rename {} to {}: {}", partial.string(), target.string(), error.message()));
}

}  // namespace gputrain::data

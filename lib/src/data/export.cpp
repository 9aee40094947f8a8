#include "gputrain/data/export.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"

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

void export_npy(const Dataset& dataset, const std::filesystem::path& dir, Split split) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw DataError(fmt::format("cannot create {}: {}", dir.string(), error.message()));
  const std::string prefix = split == Split::kTrain ? "train" : "test";
  write_npy(dir / (prefix + "_inputs.npy"), dataset.inputs());
  if (dataset.targets().defined()) write_npy(dir / (prefix + "_targets.npy"), dataset.targets());
}

}  // namespace gputrain::data

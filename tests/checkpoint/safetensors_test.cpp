// Issue 40 #5: safetensors written and read back, every damaged file a
// CheckpointError (exit 2) naming the file and what is wrong, and the weights
// readers taking a .safetensors file as they take a model.pt.
#include "gputrain/checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <string>

#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "support/temp_dir.h"

namespace gputrain::checkpoint {
namespace {

using testing::TempDir;

// A file of `header` (JSON text) and `data`, its length field as the format has it.
std::string file_of(const std::string& header, const std::string& data = "") {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
  return bytes + header + data;
}

std::string error_of(const std::string& bytes) {
  try {
    parse_safetensors(bytes, "x.safetensors");
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUserInput);
    return e.what();
  }
  return "";
}

TEST(Safetensors, EveryDtypeAndTheMetadataReadBackAsWritten) {
  torch::manual_seed(3);
  Safetensors written;
  written.tensors = {
      {"w", torch::randn({2, 3})},
      {"d", torch::randn({3}, torch::kFloat64)},
      {"h", torch::randn({2, 2}).to(torch::kHalf)},
      {"b16", torch::randn({5}).to(torch::kBFloat16)},
      {"steps", torch::tensor(int64_t{7})},
      {"i", torch::arange(4, torch::kInt)},
      {"s", torch::arange(3, torch::kShort)},
      {"c", torch::arange(-2, 2, torch::kChar)},
      {"u", torch::arange(3, torch::kByte)},
      {"mask", torch::tensor({true, false})},
      {"empty", torch::zeros({0, 4})},
      {"strided", torch::arange(12, torch::kFloat).reshape({3, 4}).t()},  // written contiguous
  };
  written.metadata = {{"format", "pt"}, {"note", "caf\u00e9"}};
  const std::string bytes = safetensors_bytes(written);
  EXPECT_TRUE(looks_like_safetensors(bytes));
  uint64_t header = 0;
  for (int i = 0; i < 8; ++i) header |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  EXPECT_EQ(header % 8, 0u);  // padded: the tensors start aligned

  const Safetensors read = parse_safetensors(bytes, "x.safetensors");
  EXPECT_EQ(read.metadata, written.metadata);
  ASSERT_EQ(read.tensors.size(), written.tensors.size());
  for (std::size_t i = 0; i < read.tensors.size(); ++i) {
    EXPECT_EQ(read.tensors[i].first, written.tensors[i].first);  // the file's order is the writer's
    EXPECT_EQ(read.tensors[i].second.scalar_type(), written.tensors[i].second.scalar_type()) << read.tensors[i].first;
    EXPECT_TRUE(torch::equal(read.tensors[i].second, written.tensors[i].second)) << read.tensors[i].first;
  }
}

TEST(Safetensors, DamagedFilesAreCheckpointErrorsSayingWhatIsWrong) {
  const std::string eight(8, '\0');
  const std::string f32_2 = R"("dtype": "F32", "shape": [2])";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"abcde", "it has 5 bytes, fewer than the 8 of its header's length"},
      {file_of("{}").substr(0, 8) + "{", "its header's length (2 bytes) runs past the end of the file (9 bytes)"},
      {std::string("\xff\xff\xff\xff\xff\xff\xff\xff{}", 10), "runs past the end of the file"},
      {file_of("{nope"), "its header is not valid JSON"},
      {file_of("{\"caf\xe9\": 1}"), "its header is not valid JSON"},            // not UTF-8
      {file_of(R"({"__metadata__": 1e999})"), "its header is not valid JSON"},  // found by fuzzing: out_of_range
      {file_of("[1]"), "its header is not a JSON object"},
      {file_of(R"({"a": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}})", "x"),
       "tensor 'a' has the dtype \"Q4\", which gputrain does not read (it reads BOOL, U8"},
      {file_of(R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", "abcd"), "tensor 'a' has no dtype"},
      {file_of(R"({"a": {)" + f32_2 + R"(, "data_offsets": [0, 80]}})", eight),
       "tensor 'a' has the data_offsets [0, 80], outside the 8 bytes of data"},
      {file_of(R"({"a": {)" + f32_2 + R"(, "data_offsets": [-8, 0]}})", eight),
       "tensor 'a' has the data_offsets [-8,0], not [begin, end]"},
      {file_of(R"({"a": {)" + f32_2 + R"(, "data_offsets": [0, 8]}, "b": {)" + f32_2 + R"(, "data_offsets": [4, 12]}})",
               eight + "1234"),
       "tensor 'b' overlaps 'a'"},
      {file_of(R"({"b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", eight),
       "4 bytes before tensor 'b' belong to no tensor"},
      {file_of(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", eight),
       "4 bytes after its last tensor belong to no tensor"},
      {file_of(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", eight),
       "tensor 'a' of shape [3] and dtype F32 needs 12 bytes, but its data_offsets hold 8"},
      {file_of(
           R"({"a": {"dtype": "F32", "shape": [4611686018427387904, 4611686018427387904], "data_offsets": [0, 8]}})",
           eight),
       "needs more than 2^64 bytes, but its data_offsets hold 8"},
      {file_of(R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", "abcd"),
       "tensor 'a' has the shape [1.5], not a list of sizes"},
      {file_of(R"({"__metadata__": {"format": 1}})"), "its __metadata__ is not a map of strings to strings"},
      {file_of(R"({"m": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}})", std::string("\x01\x02", 2)),
       "tensor 'm' of dtype BOOL holds a byte that is neither 0 nor 1"},
  };
  for (const auto& [bytes, problem] : cases) {
    const std::string message = error_of(bytes);
    EXPECT_EQ(message.rfind("x.safetensors: not a valid safetensors file: ", 0), 0u) << message;
    EXPECT_NE(message.find(problem), std::string::npos) << message << "\n  expected: " << problem;
    EXPECT_NE(message.find("; it was cut short, damaged or written by something else: write it again"),
              std::string::npos)
        << message;
  }
  EXPECT_THROW(read_safetensors("/nonexistent/x.safetensors"), CheckpointError);
}

}  // namespace
}  // namespace gputrain::checkpoint

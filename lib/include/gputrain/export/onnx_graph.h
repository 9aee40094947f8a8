#pragma once
// An ONNX model as plain C++ values, and its one writer. Callers build a
// Graph (models/ maps its layers onto nodes); serialize() alone sees ONNX's
// protobuf classes. This header includes neither protobuf nor LibTorch: the
// torch wheel ships its own, older protobuf headers on LibTorch's include
// path, which do not compile against the system's libprotobuf that libonnx
// needs, so no file may see both (lib/CMakeLists.txt builds this module
// without LibTorch).
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace gputrain::onnx {

// The operator set the nodes are written for: 17 has LayerNormalization; it is
// what libonnx 1.12 knows and every ONNX Runtime since 1.14 runs.
inline constexpr int64_t kOpsetVersion = 17;

struct Attribute {
  std::string name;
  std::variant<int64_t, float, std::vector<int64_t>> value;
};

struct Node {
  std::string op;                   // "Conv", "Gemm", ...
  std::vector<std::string> inputs;  // value names
  std::string output;               // the value it makes; also the node's name
  std::vector<Attribute> attributes;
};

// A float32 constant: a layer's weights, or normalisation's mean and std; or,
// with `integers`, an int64 one (a Reshape's shape).
struct Initializer {
  std::string name;
  std::vector<int64_t> dims;
  std::vector<float> values;
  std::vector<int64_t> integers;  // an int64 tensor's values: `values` is then empty
};

struct Graph {
  std::string name;                  // the model's, e.g. the run's
  std::string input = "input";       // float32 [batch, input_shape...]; the batch is the dimension "batch"
  std::vector<int64_t> input_shape;  // per sample
  std::string output;                // the value that is the model's output, [batch, outputs]
  int64_t outputs = 0;
  std::vector<Node> nodes;  // in execution order
  std::vector<Initializer> initializers;
  std::vector<std::pair<std::string, std::string>> metadata;  // the model's metadata_props
  std::string doc;                                            // the model's doc_string

  // Appends a node and returns its output's name (`output`), for the next node's inputs.
  std::string add(std::string op, std::vector<std::string> inputs, std::string output,
                  std::vector<Attribute> attributes = {});
  // Appends a constant and returns its name.
  std::string constant(std::string name, std::vector<int64_t> dims, std::vector<float> values);
  // Appends an int64 constant shaped `dims` ({} for a scalar) and returns its name.
  std::string integers(std::string name, std::vector<int64_t> dims, std::vector<int64_t> values);
};

// The ModelProto's bytes, checked by ONNX's own checker (an InternalError
// naming what it found: a graph models/ built wrong is gputrain's bug).
std::string serialize(const Graph& graph, const std::string& producer_version);

}  // namespace gputrain::onnx

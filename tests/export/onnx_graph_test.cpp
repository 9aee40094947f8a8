// The ONNX writer read back with ONNX's own classes: the batch a named
// (dynamic) dimension, the weights' bytes, the metadata, and the checker's
// verdict on a broken graph. Built without LibTorch, as the module is.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>

#include "gputrain/common/error.h"
#include "gputrain/export/onnx_graph.h"

namespace gputrain::onnx {
namespace {

Graph two_features_to_three() {
  Graph graph;
  graph.name = "tiny";
  graph.input_shape = {2};
  graph.outputs = 3;
  const std::string weight = graph.constant("fc.weight", {3, 2}, {1, 2, 3, 4, 5, 6});
  graph.output = graph.add("Gemm", {graph.input, weight}, "logits", {{"transB", int64_t{1}}});
  graph.metadata = {{"class_names", R"(["a","b","c"])"}};
  graph.doc = "a test";
  return graph;
}

::onnx::ModelProto read(const std::string& bytes) {
  ::onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromString(bytes));
  return model;
}

TEST(OnnxGraph, WritesABatchDimensionTheWeightsAndTheMetadata) {
  const ::onnx::ModelProto model = read(serialize(two_features_to_three(), "1.2.3"));
  EXPECT_EQ(model.producer_name(), "gputrain");
  EXPECT_EQ(model.producer_version(), "1.2.3");
  ASSERT_EQ(model.opset_import_size(), 1);
  EXPECT_EQ(model.opset_import(0).version(), kOpsetVersion);
  const auto& graph = model.graph();
  ASSERT_EQ(graph.input_size(), 1);
  const auto& input = graph.input(0).type().tensor_type();
  EXPECT_EQ(input.elem_type(), ::onnx::TensorProto::FLOAT);
  ASSERT_EQ(input.shape().dim_size(), 2);
  EXPECT_EQ(input.shape().dim(0).dim_param(), "batch");
  EXPECT_EQ(input.shape().dim(1).dim_value(), 2);
  const auto& output = graph.output(0);
  EXPECT_EQ(output.name(), "logits");
  EXPECT_EQ(output.type().tensor_type().shape().dim(0).dim_param(), "batch");
  EXPECT_EQ(output.type().tensor_type().shape().dim(1).dim_value(), 3);
  ASSERT_EQ(graph.node_size(), 1);
  EXPECT_EQ(graph.node(0).op_type(), "Gemm");
  EXPECT_EQ(graph.node(0).name(), "logits");
  EXPECT_EQ(graph.node(0).attribute(0).i(), 1);
  ASSERT_EQ(graph.initializer_size(), 1);
  const auto& weight = graph.initializer(0);
  EXPECT_EQ(weight.name(), "fc.weight");
  EXPECT_EQ(std::vector<int64_t>(weight.dims().begin(), weight.dims().end()), (std::vector<int64_t>{3, 2}));
  std::vector<float> values(6);
  ASSERT_EQ(weight.raw_data().size(), sizeof(float) * values.size());
  std::memcpy(values.data(), weight.raw_data().data(), weight.raw_data().size());
  EXPECT_EQ(values, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  ASSERT_EQ(model.metadata_props_size(), 1);
  EXPECT_EQ(model.metadata_props(0).key(), "class_names");
  EXPECT_EQ(model.metadata_props(0).value(), R"(["a","b","c"])");
  EXPECT_EQ(model.doc_string(), "a test");
}

TEST(OnnxGraph, ABrokenGraphIsGputrainsBugNamedByTheChecker) {
  Graph graph = two_features_to_three();
  graph.nodes.front().inputs.push_back("nowhere");
  graph.nodes.front().op = "NoSuchOp";
  try {
    serialize(graph, "1.2.3");
    ADD_FAILURE() << "serialised";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("the ONNX graph of tiny is invalid"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gputrain::onnx

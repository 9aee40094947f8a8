#include "gputrain/export/onnx_graph.h"

#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include "gputrain/common/error.h"

namespace gputrain::onnx {

std::string Graph::add(std::string op, std::vector<std::string> inputs, std::string output,
                       std::vector<Attribute> attributes) {
  nodes.push_back({std::move(op), std::move(inputs), std::move(output), std::move(attributes)});
  return nodes.back().output;
}

std::string Graph::constant(std::string name, std::vector<int64_t> dims, std::vector<float> values) {
  initializers.push_back({std::move(name), std::move(dims), std::move(values), {}});
  return initializers.back().name;
}

std::string Graph::integers(std::string name, std::vector<int64_t> dims, std::vector<int64_t> values) {
  initializers.push_back({std::move(name), std::move(dims), {}, std::move(values)});
  return initializers.back().name;
}

namespace {

// A float32 tensor type whose first dimension is the batch, named so that any size goes in.
void batched_float(::onnx::ValueInfoProto& value, const std::string& name, const std::vector<int64_t>& per_sample) {
  value.set_name(name);
  auto* tensor = value.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(::onnx::TensorProto::FLOAT);
  auto* shape = tensor->mutable_shape();
  shape->add_dim()->set_dim_param("batch");
  for (const int64_t size : per_sample) shape->add_dim()->set_dim_value(size);
}

void set_attribute(::onnx::AttributeProto& proto, const Attribute& attribute) {
  proto.set_name(attribute.name);
  if (const auto* integer = std::get_if<int64_t>(&attribute.value)) {
    proto.set_type(::onnx::AttributeProto::INT);
    proto.set_i(*integer);
  } else if (const auto* real = std::get_if<float>(&attribute.value)) {
    proto.set_type(::onnx::AttributeProto::FLOAT);
    proto.set_f(*real);
  } else {
    proto.set_type(::onnx::AttributeProto::INTS);
    for (const int64_t value : std::get<std::vector<int64_t>>(attribute.value)) proto.add_ints(value);
  }
}

}  // namespace

std::string serialize(const Graph& graph, const std::string& producer_version) {
  ::onnx::ModelProto model;
  model.set_ir_version(::onnx::IR_VERSION);
  model.set_producer_name("gputrain");
  model.set_producer_version(producer_version);
  model.set_doc_string(graph.doc);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpsetVersion);
  for (const auto& [key, value] : graph.metadata) {
    auto* entry = model.add_metadata_props();
    entry->set_key(key);
    entry->set_value(value);
  }
  auto* proto = model.mutable_graph();
  proto->set_name(graph.name);
  batched_float(*proto->add_input(), graph.input, graph.input_shape);
  batched_float(*proto->add_output(), graph.output, {graph.outputs});
  for (const Initializer& constant : graph.initializers) {
    auto* tensor = proto->add_initializer();
    tensor->set_name(constant.name);
    for (const int64_t size : constant.dims) tensor->add_dims(size);
    if (!constant.integers.empty()) {
      tensor->set_data_type(::onnx::TensorProto::INT64);
      tensor->set_raw_data(constant.integers.data(), constant.integers.size() * sizeof(int64_t));
      continue;
    }
    tensor->set_data_type(::onnx::TensorProto::FLOAT);
    // raw_data: the values' bytes in one copy (ONNX stores them little-endian, as x86 and ARM hold them), where
    // float_data would be a repeated field added to value by value.
    tensor->set_raw_data(constant.values.data(), constant.values.size() * sizeof(float));
  }
  for (const Node& node : graph.nodes) {
    auto* proto_node = proto->add_node();
    proto_node->set_op_type(node.op);
    proto_node->set_name(node.output);
    for (const std::string& input : node.inputs) proto_node->add_input(input);
    proto_node->add_output(node.output);
    for (const Attribute& attribute : node.attributes) set_attribute(*proto_node->add_attribute(), attribute);
  }
  try {
    ::onnx::checker::check_model(model);
  } catch (const ::onnx::checker::ValidationError& e) {
    throw InternalError(fmt::format("the ONNX graph of {} is invalid: {}", graph.name, e.what()));
  }
  std::string bytes;
  GPUTRAIN_CHECK(model.SerializeToString(&bytes), "cannot serialise the ONNX model of {} ({} bytes of weights)",
                 graph.name, model.ByteSizeLong());
  return bytes;
}

}  // namespace gputrain::onnx

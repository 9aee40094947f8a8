#include "optimizer_io.h"

#include <c10/util/StringUtil.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "gputrain/common/error.h"

namespace gputrain::checkpoint::detail {

namespace {

using torch::optim::Optimizer;
using torch::optim::OptimizerParamState;
using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;
using TensorColumn = c10::List<std::optional<at::Tensor>>;

// The kinds gputrain trains with (optim.name); the multi-tensor variants derive from them.
const char* kind_of(const Optimizer& optimizer) {
  if (dynamic_cast<const torch::optim::SGD*>(&optimizer) != nullptr) return "sgd";
  if (dynamic_cast<const torch::optim::Adam*>(&optimizer) != nullptr) return "adam";
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer) != nullptr) return "adamw";
  return nullptr;
}

// Every parameter of every group, in order: a parameter's index in the lists.
std::vector<at::Tensor> all_parameters(const Optimizer& optimizer) {
  std::vector<at::Tensor> out;
  for (const auto& group : optimizer.param_groups())
    out.insert(out.end(), group.params().begin(), group.params().end());
  return out;
}

// One parameter's state as a row: SGD's momentum_buffer; Adam's and AdamW's
// step, exp_avg, exp_avg_sq and max_exp_avg_sq (the last with amsgrad only).
struct StateRow {
  int64_t step = 0;
  std::array<at::Tensor, 3> tensors;
};

template <typename AdamState>
std::unique_ptr<OptimizerParamState> adam_state(const StateRow& row) {
  auto state = std::make_unique<AdamState>();
  state->step(row.step);
  state->exp_avg(row.tensors[0]);
  state->exp_avg_sq(row.tensors[1]);
  state->max_exp_avg_sq(row.tensors[2]);
  return state;
}

StateRow row_of(const OptimizerParamState& state) {
  if (const auto* s = dynamic_cast<const torch::optim::SGDParamState*>(&state)) return {0, {s->momentum_buffer()}};
  if (const auto* s = dynamic_cast<const torch::optim::AdamParamState*>(&state)) {
    return {s->step(), {s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()}};
  }
  if (const auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(&state)) {
    return {s->step(), {s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()}};
  }
  ::gputrain::detail::throw_internal(__FILE__, __LINE__,
                                     "a parameter state of an optimizer other than SGD, Adam or AdamW");
}

std::unique_ptr<OptimizerParamState> state_of(const std::string& kind, const StateRow& row) {
  if (kind == "sgd") {
    auto state = std::make_unique<torch::optim::SGDParamState>();
    state->momentum_buffer(row.tensors[0]);
    return state;
  }
  if (kind == "adam") return adam_state<torch::optim::AdamParamState>(row);
  return adam_state<torch::optim::AdamWParamState>(row);
}

std::string group_options_key(std::size_t group) { return fmt::format("optimizer_options_{}", group); }

}  // namespace

void write_optimizer_lists(OutputArchive& root, const Optimizer& optimizer) {
  const char* kind = kind_of(optimizer);
  GPUTRAIN_CHECK(kind != nullptr, "checkpoints hold the state of SGD, Adam and AdamW only");
  root.write("optimizer_kind", std::string(kind));
  c10::List<int64_t> sizes;
  for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    const auto& group = optimizer.param_groups()[g];
    sizes.push_back(static_cast<int64_t>(group.params().size()));
    OutputArchive options(root.compilation_unit());
    group.options().serialize(options);
    root.write(group_options_key(g), options);
  }
  root.write("optimizer_group_sizes", sizes);
  const std::vector<at::Tensor> parameters = all_parameters(optimizer);
  c10::List<int64_t> index;
  c10::List<int64_t> steps;
  std::array<TensorColumn, 3> columns;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const auto found = optimizer.state().find(parameters[i].unsafeGetTensorImpl());
    if (found == optimizer.state().end()) continue;
    const StateRow row = row_of(*found->second);
    index.push_back(static_cast<int64_t>(i));
    steps.push_back(row.step);
    for (std::size_t c = 0; c < columns.size(); ++c) {
      columns[c].push_back(row.tensors[c].defined() ? std::optional<at::Tensor>(row.tensors[c]) : std::nullopt);
    }
  }
  root.write("optimizer_state_index", index);
  root.write("optimizer_state_step", steps);
  for (std::size_t c = 0; c < columns.size(); ++c) root.write(fmt::format("optimizer_state_{}", c), columns[c]);
}

bool has_optimizer_lists(InputArchive& root) {
  c10::IValue kind;
  return root.try_read("optimizer_kind", kind);
}

void read_optimizer_lists(InputArchive& root, Optimizer& optimizer, const std::string& name) {
  auto fail = [&name](const std::string& problem) { throw CheckpointError(fmt::format("{}: {}", name, problem)); };
  auto entry = [&](const std::string& key) {
    c10::IValue value;
    if (!root.try_read(key, value)) fail(fmt::format("has no '{}' entry (not a complete checkpoint)", key));
    return value;
  };
  auto int_list = [&](const std::string& key) {
    const c10::IValue value = entry(key);
    if (!value.isIntList()) fail(fmt::format("'{}' is not a list of whole numbers", key));
    return value.toIntVector();
  };
  const c10::IValue kind_value = entry("optimizer_kind");
  const char* live = kind_of(optimizer);
  if (!kind_value.isString() || live == nullptr || kind_value.toStringRef() != live) {
    fail(fmt::format("holds the state of optimizer '{}', but the run's is '{}'; optim.name changed?",
                     kind_value.isString() ? kind_value.toStringRef() : "?", live ? live : "?"));
  }
  const std::string kind = kind_value.toStringRef();
  std::vector<int64_t> live_sizes;
  for (const auto& group : optimizer.param_groups()) live_sizes.push_back(static_cast<int64_t>(group.params().size()));
  const std::vector<int64_t> sizes = int_list("optimizer_group_sizes");
  if (sizes != live_sizes) {
    fail(
        fmt::format("its optimizer has parameter groups of [{}] parameters, the run's of [{}]; the model, "
                    "optim.no_decay_bias_norm or optim.bias_lr_multiplier changed?",
                    fmt::join(sizes, ", "), fmt::join(live_sizes, ", ")));
  }
  const std::vector<int64_t> index = int_list("optimizer_state_index");
  const std::vector<int64_t> steps = int_list("optimizer_state_step");
  std::vector<c10::List<c10::IValue>> columns;
  for (std::size_t c = 0; c < StateRow{}.tensors.size(); ++c) {
    const std::string key = fmt::format("optimizer_state_{}", c);
    const c10::IValue value = entry(key);
    if (!value.isList()) fail(fmt::format("'{}' is not a list of tensors", key));
    columns.push_back(value.toList());
    if (columns[c].size() != index.size()) fail(fmt::format("'{}' does not have a row per parameter state", key));
  }
  if (steps.size() != index.size()) fail("'optimizer_state_step' does not have a row per parameter state");
  const std::vector<at::Tensor> parameters = all_parameters(optimizer);
  std::vector<std::pair<void*, std::unique_ptr<OptimizerParamState>>> states;
  for (std::size_t row = 0; row < index.size(); ++row) {
    const int64_t i = index[row];
    if (i < 0 || i >= static_cast<int64_t>(parameters.size()) || (row > 0 && i <= index[row - 1])) {
      fail(fmt::format("'optimizer_state_index' holds {}, not a parameter in order", i));
    }
    const at::Tensor& parameter = parameters[static_cast<std::size_t>(i)];
    StateRow state{steps[row], {}};
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const c10::IValue cell = columns[c].get(row);
      if (cell.isNone()) continue;
      if (!cell.isTensor() || cell.toTensor().sizes() != parameter.sizes()) {
        fail(fmt::format("the optimizer state of parameter {} does not fit it (shape {}); the model changed?", i,
                         c10::str(parameter.sizes())));
      }
      state.tensors[c] = cell.toTensor();
    }
    states.emplace_back(parameter.unsafeGetTensorImpl(), state_of(kind, state));
  }
  for (std::size_t g = 0; g < optimizer.param_groups().size(); ++g) {
    const std::string key = group_options_key(g);
    if (!entry(key).isObject()) fail(fmt::format("'{}' is not an archive", key));
    InputArchive options;
    root.read(key, options);
    optimizer.param_groups()[g].options().serialize(options);
  }
  optimizer.state().clear();
  for (auto& [key, state] : states) optimizer.state()[key] = std::move(state);
}

}  // namespace gputrain::checkpoint::detail

#include "gputrain/data/description.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "gputrain/common/error.h"

namespace gputrain::data {

namespace {

// Written into every description; a reader refuses other versions.
constexpr int kDescriptionVersion = 1;

const char* kind_word(TargetKind kind) {
  switch (kind) {
    case TargetKind::kClasses:
      return "classes";
    case TargetKind::kValues:
      return "values";
    case TargetKind::kNone:
      return "none";
  }
  return "none";
}

std::string samples_text(const DatasetInfo& info) {
  return fmt::format("{} of [{}]", info.images ? "uint8 images" : "features", fmt::join(info.input_shape, ", "));
}

std::string targets_text(const DatasetInfo& info) {
  switch (info.target_kind) {
    case TargetKind::kClasses:
      return "class labels";
    case TargetKind::kValues:
      return fmt::format("{} regression value{} a sample", info.targets, info.targets == 1 ? "" : "s");
    case TargetKind::kNone:
      return "no labels";
  }
  return "no labels";
}

}  // namespace

std::string model_description(const DatasetInfo& info) {
  return nlohmann::ordered_json{{"version", kDescriptionVersion},
                                {"name", info.name},
                                {"input_shape", info.input_shape},
                                {"images", info.images},
                                {"target_kind", kind_word(info.target_kind)},
                                {"classes", info.classes},
                                {"class_names", info.class_names},
                                {"targets", info.targets},
                                {"columns", info.columns}}
      .dump();
}

DatasetInfo read_model_description(std::string_view text, const std::string& where) {
  const auto damaged = [&](const std::string& why) {
    return CheckpointError(fmt::format("{}: its description of the training data is damaged ({})", where, why));
  };
  DatasetInfo info;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.at("version").get<int>() != kDescriptionVersion) {
      throw CheckpointError(fmt::format(
          "{}: describes its training data in version {}, which this gputrain does not read; use a newer gputrain",
          where, j.at("version").get<int>()));
    }
    info.name = j.at("name").get<std::string>();
    info.source = where;
    info.input_shape = j.at("input_shape").get<std::vector<int64_t>>();
    info.images = j.at("images").get<bool>();
    const std::string kind = j.at("target_kind").get<std::string>();
    bool known = false;
    for (const TargetKind k : {TargetKind::kClasses, TargetKind::kValues, TargetKind::kNone}) {
      if (kind == kind_word(k)) {
        info.target_kind = k;
        known = true;
      }
    }
    if (!known) throw damaged(fmt::format("target_kind '{}'", kind));
    info.classes = j.at("classes").get<int64_t>();
    info.class_names = j.at("class_names").get<std::vector<std::string>>();
    info.targets = j.at("targets").get<int64_t>();
    info.columns = j.at("columns").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw damaged(e.what());
  }
  const bool shaped = !info.input_shape.empty() && (!info.images || info.input_shape.size() == 3) &&
                      std::all_of(info.input_shape.begin(), info.input_shape.end(), [](int64_t n) { return n > 0; });
  if (!shaped) throw damaged(fmt::format("sample shape [{}]", fmt::join(info.input_shape, ", ")));
  const bool classes =
      info.target_kind != TargetKind::kClasses ||
      (info.classes > 0 && (info.class_names.empty() || static_cast<int64_t>(info.class_names.size()) == info.classes));
  if (!classes) throw damaged(fmt::format("{} classes, {} names", info.classes, info.class_names.size()));
  if (info.target_kind == TargetKind::kValues && info.targets < 1) {
    throw damaged(fmt::format("{} regression targets", info.targets));
  }
  return info;
}

std::string description_summary(const DatasetInfo& info) {
  const std::string targets = info.target_kind == TargetKind::kClasses
                                  ? fmt::format("{} classes{}", info.classes,
                                                info.class_names.empty() || info.class_names.size() > 10
                                                    ? ""
                                                    : fmt::format(" ({})", fmt::join(info.class_names, ", ")))
                                  : targets_text(info);
  return fmt::format("{}: {}, {}", info.name, samples_text(info), targets);
}

std::string description_mismatch(const DatasetInfo& trained, const DatasetInfo& info) {
  if (info.images != trained.images || info.input_shape != trained.input_shape) {
    return fmt::format("holds {}, but the model was trained on {}", samples_text(info), samples_text(trained));
  }
  if (info.target_kind != trained.target_kind ||
      (info.target_kind == TargetKind::kValues && info.targets != trained.targets)) {
    return fmt::format("has {}, but the model was trained on {}", targets_text(info), targets_text(trained));
  }
  if (info.target_kind != TargetKind::kClasses) return "";
  if (!info.class_names.empty() && !trained.class_names.empty() && info.class_names != trained.class_names) {
    return fmt::format("names its classes {}, but the model's are {} (in that order)",
                       fmt::join(info.class_names, ", "), fmt::join(trained.class_names, ", "));
  }
  if (info.classes > trained.classes) {
    return fmt::format("has {} classes, but the model was trained on {}", info.classes, trained.classes);
  }
  return "";
}

}  // namespace gputrain::data

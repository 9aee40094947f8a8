#include "gputrain/config/load.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>    // YAML::DeepRecursion, not included by yaml.h
#include <yaml-cpp/eventhandler.h>  // nor YAML::EventHandler
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "gputrain/common/strings.h"
#include "node_reader.h"
#include "read.h"

namespace gputrain::config {

using detail::NodeReader;
using detail::OverrideMarks;

std::string default_data_root(DatasetName dataset) {
  switch (dataset) {
    case DatasetName::kCifar10:
      return "datasets/cifar-10-batches-bin";
    case DatasetName::kFashionMnist:
      return "/usr/share/datasets/fashion-mnist";
    case DatasetName::kMnist:
      return "datasets/mnist";
    case DatasetName::kNpy:  // the user's own arrays and tables: no default place
    case DatasetName::kCsv:
    case DatasetName::kImageFolder:
    case DatasetName::kRandom:
    case DatasetName::kSynthetic:
      break;
  }
  return "";  // generated in memory
}

namespace {

// An experiment file is a few kilobytes, or a few megabytes with a long
// model.layers (the config.yaml of a 100,000-layer run is 1.9 MB, and must
// read back). A larger one is the wrong file (a data set, /dev/zero), which
// is refused before it is read into memory.
constexpr std::size_t kMaxConfigBytes = std::size_t{16} << 20;

UserError too_large(const std::string& origin) {
  return UserError(fmt::format(
      "{}: larger than 16 MiB; an experiment file is a few kilobytes (a model.layers of 100,000 layers about 2 MB). "
      "Is this the right file?",
      origin));
}

// yaml-cpp's parser recurses once per level of nesting and stops, with a
// DeepRecursion, before the stack runs out; it names the problem "bad file".
constexpr const char* kTooDeep =
    "nested too deeply to parse (an experiment file nests three levels: section, key, list)";

// yaml-cpp reads `<<` as an ordinary key; a file relying on YAML 1.1's merge
// keys would lose the merged values (or meet "unknown key '<<'"), so say why.
void reject_merge_keys(const YAML::Node& node, const std::string& origin) {
  if (node.IsMap()) {
    for (const auto& entry : node) {
      if (entry.first.IsScalar() && entry.first.Scalar() == "<<") {
        throw UserError(fmt::format("{}: YAML merge keys (<<) are not supported; write the keys out in full",
                                    detail::mark_from(entry.first.Mark(), origin).str()));
      }
      reject_merge_keys(entry.second, origin);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) reject_merge_keys(item, origin);
  }
}

// Where each document of a stream starts, without building it. yaml-cpp
// 0.7's LoadAll never returns on a stray ',' (jbeder/yaml-cpp#1040, fixed in
// 0.8 by #1319): the parser hands back the same empty document again and
// again without consuming the token, allocating a node each time.
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override { first_node_.reset(); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark, /*null=*/true); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override { node(mark); }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(mark);
  }
  void OnMapEnd() override {}

  // The first node of the document just handled, and whether it was a bare null.
  std::optional<YAML::Mark> first_node() const { return first_node_; }
  bool bare_null() const { return bare_null_; }

 private:
  void node(const YAML::Mark& mark, bool null = false) {
    if (first_node_) {
      bare_null_ = false;
      return;
    }
    first_node_ = mark;
    bare_null_ = null;
  }
  std::optional<YAML::Mark> first_node_;
  bool bare_null_ = false;
};

// ParserException for a stream of more than one document, or one the parser stalls in.
void check_one_document(const std::string& text, const std::string& origin) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts starts;
  std::optional<YAML::Mark> previous_null;
  for (int documents = 0; parser.HandleNextDocument(starts);) {
    const std::optional<YAML::Mark> at = starts.first_node();
    if (at && starts.bare_null() && previous_null && previous_null->pos == at->pos) {
      throw YAML::ParserException(*at, "the parser cannot read on from here (a ',' outside [...] or {...}?)");
    }
    previous_null = starts.bare_null() ? at : std::nullopt;
    if (++documents == 2 && at) {
      throw UserError(
          fmt::format("{}: a second YAML document begins here; an experiment file is one document, so "
                      "remove the '---' line and what follows, or put it in a file of its own",
                      detail::mark_from(*at, origin).str()));
    }
  }
}

YAML::Node parse_yaml(const std::string& text, const std::string& origin) {
  if (text.size() > kMaxConfigBytes) throw too_large(origin);
  try {
    check_one_document(text, origin);
    YAML::Node root = YAML::Load(text);
    reject_merge_keys(root, origin);
    return root;
  } catch (const YAML::DeepRecursion& e) {
    throw UserError(fmt::format("{}: {}", detail::mark_from(e.mark, origin).str(), kTooDeep));
  } catch (const YAML::ParserException& e) {
    throw UserError(fmt::format("{}: malformed YAML: {}. Check the indentation and quoting near that position.",
                                detail::mark_from(e.mark, origin).str(), e.msg));
  }
}

// --set section={key: value, ...} into an existing section: key by key (and
// so into nested sections), leaving the section's other keys as they were.
void merge_override(YAML::Node target, const YAML::Node& value, const std::string& key, const SourceMark& mark,
                    OverrideMarks& marks) {
  for (const auto& entry : value) {
    const std::string name = entry.first.Scalar();
    YAML::Node existing = target[name];
    if (entry.second.IsMap() && existing && existing.IsMap()) {
      merge_override(existing, entry.second, key + "." + name, mark, marks);
    } else {
      target[name] = entry.second;
      marks[key + "." + name] = mark;
    }
  }
}

// Applies one --set KEY=VALUE to the document; VALUE is a YAML scalar, list or
// mapping (merged into a section key by key).
void apply_override(YAML::Node& root, const std::string& assignment, int number, OverrideMarks& marks) {
  const std::string origin = printable(fmt::format("--set #{} ({})", number, assignment));
  const auto equals = assignment.find('=');
  if (equals == std::string::npos || equals == 0) {
    throw UserError(fmt::format("{}: expected KEY=VALUE with a dotted key, e.g. --set data.batch_size=64", origin));
  }
  const std::string key(trim(std::string_view(assignment).substr(0, equals)));
  const std::vector<std::string> parts = split(key, '.');
  for (const auto& part : parts) {
    if (part.empty()) throw ConfigError({origin, 0, 0}, key, "empty part in dotted key");
  }
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(equals + 1));
  } catch (const YAML::DeepRecursion&) {
    throw ConfigError({origin, 0, 0}, key, fmt::format("value is {}", kTooDeep));
  } catch (const YAML::ParserException& e) {
    throw ConfigError({origin, 0, 0}, key, fmt::format("value is not valid YAML: {}", e.msg));
  }
  YAML::Node cursor = root;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node child = cursor[parts[i]];
    if (!child || child.IsNull()) {
      cursor[parts[i]] = YAML::Node(YAML::NodeType::Map);
      child = cursor[parts[i]];
    } else if (!child.IsMap()) {
      std::string parent = parts[0];
      for (std::size_t j = 1; j <= i; ++j) parent += "." + parts[j];
      throw ConfigError({origin, 0, 0}, key, fmt::format("'{}' is not a section", parent));
    }
    cursor.reset(child);
  }
  YAML::Node target = cursor[parts.back()];
  if (value.IsMap() && target && target.IsMap()) {
    merge_override(target, value, key, {origin, 0, 0}, marks);  // data={a: 1} changes data.a only
    return;
  }
  cursor[parts.back()] = value;
  marks[key] = {origin, 0, 0};
}

LoadedConfig load_document(YAML::Node root, const std::string& origin, const std::vector<std::string>& overrides) {
  if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    throw UserError(fmt::format("{}: the experiment file must be a mapping of keys (name:, data:, model:, ...)",
                                detail::mark_from(root.Mark(), origin).str()));
  }
  OverrideMarks marks;
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    apply_override(root, overrides[i], static_cast<int>(i + 1), marks);
  }
  LoadedConfig loaded;
  NodeReader reader(root, origin, "", marks, loaded.sources);
  loaded.config = detail::read_experiment(reader, loaded.sources);
  resolve_batch_forms(loaded, std::nullopt);
  return loaded;
}

// The source of a data.batch_size computed from data.micro_batch_size, so that
// a later resolution for more processes can tell it from a given one.
const SourceMark kBatchFromMicroBatch{"data.micro_batch_size x train.accumulation_steps x processes", 0, 0};

}  // namespace

void resolve_batch_forms(LoadedConfig& loaded, std::optional<int64_t> processes) {
  DataConfig& data = loaded.config.data;
  if (!data.micro_batch_size) return;
  const int64_t micro = *data.micro_batch_size;
  const int64_t accumulation = loaded.config.train.accumulation_steps;
  const int64_t per_process = micro * accumulation;
  const SourceMark given = loaded.sources.exact("data.batch_size");
  if (!given.known() || given.origin == kBatchFromMicroBatch.origin) {
    data.batch_size = per_process * processes.value_or(1);
    loaded.sources.record("data.batch_size", kBatchFromMicroBatch);
    return;
  }
  // Both given: they must agree for the run's processes, or, before those are
  // known, for some whole number of them.
  const bool agree = processes ? data.batch_size == per_process * *processes : *data.batch_size % per_process == 0;
  if (agree) return;
  const std::string makes =
      processes ? fmt::format("make a batch of {} per optimizer step", per_process * *processes)
                : fmt::format("make {} per process, which {} does not divide into", per_process, *data.batch_size);
  throw ConfigError(given, "data.batch_size",
                    fmt::format("{} disagrees with data.micro_batch_size: {} per forward pass x {}{} {}; set only "
                                "one of the two",
                                *data.batch_size, micro, count_of(accumulation, "accumulation step"),
                                processes ? " x " + count_of(*processes, "process") : "", makes));
}

LoadedConfig load_config_text(const std::string& yaml, const std::string& origin,
                              const std::vector<std::string>& overrides) {
  return load_document(parse_yaml(yaml, origin), origin, overrides);
}

LoadedConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string origin = printable(path);
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw UserError(fmt::format("{}: is a directory; --config takes an experiment file", origin));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw UserError(fmt::format("{}: cannot open the experiment file ({}). Check the path given to --config.", origin,
                                std::strerror(errno)));
  }
  // One byte past the limit is enough to know the file is too large.
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw UserError(fmt::format("{}: cannot read the experiment file ({})", origin, std::strerror(errno)));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return load_config_text(text, origin, overrides);
}

}  // namespace gputrain::config

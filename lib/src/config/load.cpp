#include "gputrain/config/load.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>    // YAML::DeepRecursion, not included by yaml.h
#include <yaml-cpp/eventhandler.h>  // nor YAML::EventHandler
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "gputrain/common/strings.h"
#include "node_reader.h"
#include "read.h"
#include "stack.h"

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

// An experiment file holds a few hundred values; aliases (*name) repeat what
// an anchor (&name) holds without copying it in the text, so a small file can
// stand for billions of values ("billion laughs") or, aliasing a node it is
// inside of, for an endless tree. Every reader walks the tree as if the
// aliases were copies, so the scan counts them as copies and stops at these.
// The values limit bounds what the aliases add beyond the values the file
// writes out: those are bounded by the file's size, and a run of a model of
// 100 000 declared layers writes (and reads back) a config of as many.
constexpr int64_t kMaxExpandedValues = 100000;
constexpr int64_t kMaxExpandedDepth = 100;

// One pass over the document's events, before any node is built: where each
// document starts, and how many values and levels it holds with its aliases
// expanded. yaml-cpp 0.7's LoadAll never returns on a stray ',' (jbeder/yaml-cpp#1040,
// fixed in 0.8 by #1319): the parser hands back the same empty document again
// and again without consuming the token, allocating a node each time.
class DocumentScan : public YAML::EventHandler {
 public:
  explicit DocumentScan(std::string origin) : origin_(std::move(origin)) {}

  void OnDocumentStart(const YAML::Mark&) override {
    first_node_.reset();
    open_.clear();
    anchors_.clear();
    total_ = Extent{};
    written_ = 0;
  }
  void OnDocumentEnd() override {}
  void OnAnchor(const YAML::Mark&, const std::string& name) override { pending_name_ = name; }
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor, /*null=*/true); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override;
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    leaf(mark, anchor);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapEnd() override { close(); }

  // The first node of the document just handled, and whether it was a bare null.
  std::optional<YAML::Mark> first_node() const { return first_node_; }
  bool bare_null() const { return bare_null_; }

 private:
  // A node with its aliases expanded: how many values, and how many levels deep.
  struct Extent {
    int64_t values = 0;
    int64_t depth = 0;
  };
  struct Anchor {
    std::string name;
    YAML::Mark mark;
    Extent extent;
    bool open = true;  // still being read: an alias to it would be inside itself
  };
  struct Open {
    YAML::anchor_t anchor;
    Extent extent;
  };

  void seen(const YAML::Mark& mark, bool null = false) {
    if (first_node_) {
      bare_null_ = false;
      return;
    }
    first_node_ = mark;
    bare_null_ = null;
  }
  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor, bool null = false) {
    seen(mark, null);
    ++written_;
    if (anchor != YAML::NullAnchor) anchors_[anchor] = Anchor{pending_name_, mark, {1, 1}, false};
    add(mark, {1, 1}, nullptr);
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    seen(mark);
    ++written_;
    if (anchor != YAML::NullAnchor) anchors_[anchor] = Anchor{pending_name_, mark, {}, true};
    open_.push_back({anchor, {1, 1}});
    open_mark_.push_back(mark);
    if (static_cast<int64_t>(open_.size()) > kMaxExpandedDepth) fail_depth(mark, nullptr);
  }
  void close() {
    const Open done = open_.back();
    const YAML::Mark mark = open_mark_.back();
    open_.pop_back();
    open_mark_.pop_back();
    if (done.anchor != YAML::NullAnchor) {
      Anchor& anchor = anchors_[done.anchor];
      anchor.extent = done.extent;
      anchor.open = false;
    }
    add(mark, done.extent, nullptr);
  }
  // Adds a child of `extent` to the innermost open node (or the document).
  void add(const YAML::Mark& mark, Extent extent, const Anchor* alias) {
    Extent& parent = open_.empty() ? total_ : open_.back().extent;
    // Both are at most the limit plus the file's own values, so the sum cannot overflow.
    parent.values += extent.values;
    if (parent.values - written_ > kMaxExpandedValues) fail_values(mark, alias);
    const int64_t levels = static_cast<int64_t>(open_.size()) + extent.depth;
    if (levels > kMaxExpandedDepth) fail_depth(mark, alias);
    parent.depth = std::max(parent.depth, extent.depth + (open_.empty() ? 0 : 1));
  }

  std::string at(const YAML::Mark& mark) const { return detail::mark_from(mark, origin_).str(); }
  [[noreturn]] void fail_values(const YAML::Mark& mark, const Anchor* alias) const {
    throw UserError(fmt::format(
        "{}: {}the document holds more than {} values once its aliases (*name) are expanded, beyond the {} it "
        "writes out, each alias counted as a copy of what it names; an experiment file holds a few hundred. Write "
        "the repeated part out, or alias less of it",
        at(mark), alias ? fmt::format("with the alias *{}, ", alias->name) : "", kMaxExpandedValues, written_));
  }
  [[noreturn]] void fail_depth(const YAML::Mark& mark, const Anchor* alias) const {
    throw UserError(fmt::format(
        "{}: {}nested too deeply: more than {} levels{}; an experiment file nests three (section, key, list)", at(mark),
        alias ? fmt::format("with the alias *{}, the document is ", alias->name) : "", kMaxExpandedDepth,
        alias ? " once its aliases are expanded" : ""));
  }

  std::string origin_;
  std::optional<YAML::Mark> first_node_;
  bool bare_null_ = false;
  std::string pending_name_;
  std::map<YAML::anchor_t, Anchor> anchors_;
  std::vector<Open> open_;
  std::vector<YAML::Mark> open_mark_;
  Extent total_;
  int64_t written_ = 0;  // values (scalars, nulls, lists and maps) the document writes out so far
};

void DocumentScan::OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) {
  seen(mark);
  const auto found = anchors_.find(anchor);
  // The parser refuses an alias to an anchor it has not seen, so this is one.
  GPUTRAIN_CHECK(found != anchors_.end(), "alias to unknown anchor {}", anchor);
  const Anchor& target = found->second;
  if (target.open) {
    throw UserError(fmt::format(
        "{}: the alias *{} is inside the node it names (&{} at line {}), which would make it endless; an alias "
        "can only repeat a node that ends before it",
        at(mark), target.name, target.name, target.mark.line + 1));
  }
  add(mark, target.extent, &target);
}

// ParserException for a stream of more than one document, or one the parser stalls in.
void check_one_document(const std::string& text, const std::string& origin) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentScan starts(origin);
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
    check_one_document(assignment.substr(equals + 1), origin);
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

LoadedConfig load_document(detail::Stacked stacked, const std::vector<std::string>& overrides,
                           std::vector<ConfigError>* problems) {
  YAML::Node& root = stacked.root;
  const std::string& origin = stacked.origin;
  if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    throw UserError(fmt::format("{}: the experiment file must be a mapping of keys (name:, data:, model:, ...)",
                                detail::mark_from(root.Mark(), origin).str()));
  }
  OverrideMarks& marks = stacked.marks;
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    apply_override(root, overrides[i], static_cast<int>(i + 1), marks);
  }
  LoadedConfig loaded;
  NodeReader reader(root, origin, "", marks, loaded.sources);
  loaded.config = detail::read_experiment(reader, loaded.sources, problems);
  if (loaded.config.data.micro_batch_size && !loaded.sources.exact("data.batch_size").known()) {
    // Messages about the batch point where it is stated (schema.h implies data.batch_size: auto).
    loaded.sources.record("data.batch_size", loaded.sources.at("data.micro_batch_size"));
  }
  return loaded;
}

// One experiment file, read and parsed.
detail::Document read_document(const std::string& path) {
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
  return {parse_yaml(text, origin), origin, path};
}

detail::Stacked stack_files(const std::vector<std::string>& paths) {
  if (paths.empty()) throw UserError("no experiment file: give --config FILE");
  std::vector<detail::Document> tops;
  for (const std::string& path : paths) tops.push_back(read_document(path));
  return detail::stack_documents(tops, read_document);
}

}  // namespace

LoadedConfig load_config_text(const std::string& yaml, const std::string& origin,
                              const std::vector<std::string>& overrides, std::vector<ConfigError>* problems) {
  return load_document(detail::stack_documents({{parse_yaml(yaml, origin), origin, origin}}, read_document), overrides,
                       problems);
}

LoadedConfig load_config(const std::string& path, const std::vector<std::string>& overrides,
                         std::vector<ConfigError>* problems) {
  return load_config(std::vector<std::string>{path}, overrides, problems);
}

LoadedConfig load_config(const std::vector<std::string>& paths, const std::vector<std::string>& overrides,
                         std::vector<ConfigError>* problems) {
  return load_document(stack_files(paths), overrides, problems);
}

std::string standalone_config_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw UserError(fmt::format("{}: cannot read it", printable(path)));
  return detail::stacked_text(text.str(), stack_files({path}));
}

}  // namespace gputrain::config

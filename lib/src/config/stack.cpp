#include "stack.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <set>
#include <utility>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"

namespace gputrain::config::detail {

namespace fs = std::filesystem;

namespace {

constexpr const char* kExtends = "extends";

// A file's identity for cycles: the same file reached by two spellings is one.
std::string identity(const std::string& path) {
  std::error_code error;
  const fs::path canonical = fs::weakly_canonical(path, error);
  return error ? fs::path(path).lexically_normal().string() : canonical.string();
}

// The `extends:` entries of a document: a file name or a list of them.
std::vector<YAML::Node> extends_entries(const YAML::Node& root, const std::string& origin) {
  if (!root.IsMap()) return {};  // a value or a list is refused as not a mapping, with the file's place
  const YAML::Node node = root[kExtends];
  if (!node) return {};
  const auto fail = [&](const YAML::Node& at) {
    throw ConfigError(mark_from(at.Mark(), origin), kExtends,
                      "expected a file name or a list of them, relative to this file (extends: base.yaml)");
  };
  std::vector<YAML::Node> entries;
  if (node.IsScalar()) {
    entries.push_back(node);
  } else if (node.IsSequence() && node.size() > 0) {
    for (const auto& item : node) {
      if (!item.IsScalar()) fail(item);
      entries.push_back(item);
    }
  } else {
    fail(node);
  }
  for (const YAML::Node& entry : entries) {
    if (entry.Scalar().empty()) fail(entry);
  }
  return entries;
}

class Stacker {
 public:
  explicit Stacker(const ReadDocument& read) : read_(read) {}

  // The document's bases (each with its own, depth first), then the document.
  void expand(Document document) {
    const std::string path = document.path;
    const std::vector<YAML::Node> entries = extends_entries(document.root, document.origin);
    const fs::path dir = fs::path(path).parent_path();
    chain_.push_back({identity(path), document.origin});
    for (const YAML::Node& entry : entries) {
      const fs::path named(entry.Scalar());
      const std::string base = (named.is_absolute() ? named : dir / named).lexically_normal().string();
      const SourceMark at = mark_from(entry.Mark(), document.origin);
      for (const auto& [id, origin] : chain_) {
        if (id != identity(base)) continue;
        std::string cycle;
        for (const auto& link : chain_) cycle += link.second + " -> ";
        throw ConfigError(at, kExtends,
                          fmt::format("'{}' closes a cycle: {}{}; files cannot build on each other in a circle, so "
                                      "remove one of these `extends:`",
                                      printable(entry.Scalar()), cycle, printable(base)));
      }
      std::error_code error;
      if (!fs::is_regular_file(base, error)) {
        throw ConfigError(at, kExtends,
                          fmt::format("no file '{}'{}; `extends:` names a file relative to the one that says it",
                                      printable(entry.Scalar()),
                                      base == entry.Scalar() ? "" : fmt::format(" (looked for {})", printable(base))));
      }
      expand(read_(base));
    }
    chain_.pop_back();
    if (!entries.empty()) document.root.remove(kExtends);
    layers_.push_back(std::move(document));
  }

  std::vector<Document> layers() && { return std::move(layers_); }

 private:
  const ReadDocument& read_;
  std::vector<std::pair<std::string, std::string>> chain_;  // identity, origin: the files being expanded
  std::vector<Document> layers_;
};

std::string kind(const YAML::Node& node) { return node.IsMap() ? "a mapping" : "a value or a list"; }

// Sets `key: value` in the map, where the key stood if it was there: the key's
// own node goes in too, so an unknown key is reported at its place in its file.
void replace(YAML::Node& map, const YAML::Node& key, const YAML::Node& value) {
  const YAML::Node& lookup = map;
  if (!lookup[key.Scalar()]) {
    map.force_insert(key, value);
    return;
  }
  // Rebuilt in place (yaml-cpp cannot swap a key): the node is the one its parent holds.
  std::vector<std::pair<YAML::Node, YAML::Node>> entries;
  for (const auto& entry : lookup) {
    const bool same = entry.first.Scalar() == key.Scalar();
    entries.emplace_back(same ? key : entry.first, same ? value : entry.second);
  }
  for (const auto& entry : entries) map.remove(entry.first.Scalar());
  for (const auto& [k, v] : entries) map.force_insert(k, v);
}

class Merger {
 public:
  Stacked& out() { return out_; }

  // Every key path of `node` (maps only: a list is one value) marked as from `origin`.
  void mark_all(const YAML::Node& node, const std::string& key, const std::string& origin) {
    out_.marks[key] = mark_from(node.Mark(), origin);
    if (!node.IsMap()) return;
    for (const auto& entry : node) mark_all(entry.second, key + "." + entry.first.Scalar(), origin);
  }

  // `source`'s keys over `target`'s: a mapping over a mapping merges key by key, anything else replaces.
  void merge(YAML::Node target, const YAML::Node& source, const std::string& prefix, const std::string& origin) {
    std::set<std::string> seen;
    for (const auto& entry : source) {
      const std::string name = entry.first.Scalar();
      const std::string key = prefix + name;
      // yaml-cpp keeps both of a repeated key; the merged map could keep only one.
      if (!seen.insert(name).second) throw ConfigError(mark_from(entry.first.Mark(), origin), key, "duplicate key");
      // Looked up through a const node: a non-const operator[] would add the key.
      const YAML::Node& lookup = target;
      YAML::Node existing = lookup[name];
      const bool replaces = existing && !existing.IsNull() && !entry.second.IsNull();
      if (replaces && existing.IsMap() != entry.second.IsMap()) {
        throw ConfigError(mark_from(entry.second.Mark(), origin), key,
                          fmt::format("is {} here but {} in {}, which this file builds on; a file over another "
                                      "merges a mapping key by key and replaces a value or a list, so give {}",
                                      kind(entry.second), kind(existing), out_.marks.at(key).str(), kind(existing)));
      }
      if (replaces && existing.IsMap()) {
        out_.marks[key] = mark_from(entry.second.Mark(), origin);
        merge(existing, entry.second, key + ".", origin);
      } else {
        replace(target, entry.first, entry.second);
        mark_all(entry.second, key, origin);
      }
    }
  }

 private:
  Stacked out_;
};

}  // namespace

Stacked stack_documents(const std::vector<Document>& tops, const ReadDocument& read) {
  Stacker stacker(read);
  for (const Document& top : tops) stacker.expand(top);
  std::vector<Document> layers = std::move(stacker).layers();
  Merger merger;
  Stacked& out = merger.out();
  out.origin = tops.back().origin;
  for (const Document& layer : layers) out.files.push_back(layer.origin);
  if (layers.size() == 1) {
    out.root = layers.front().root;
    return std::move(out);
  }
  out.root = YAML::Node(YAML::NodeType::Map);
  for (const Document& layer : layers) {
    if (!layer.root || layer.root.IsNull()) continue;  // an empty file adds nothing
    if (!layer.root.IsMap()) {
      throw UserError(fmt::format("{}: the experiment file must be a mapping of keys (name:, data:, model:, ...)",
                                  mark_from(layer.root.Mark(), layer.origin).str()));
    }
    merger.merge(out.root, layer.root, "", layer.origin);
  }
  return std::move(out);
}

std::string stacked_text(const std::string& text, const Stacked& stacked) {
  if (stacked.files.size() == 1) return text;
  const std::string first = text.substr(0, text.find('\n'));
  // Named from the printed file's folder: the names its `extends:` would use.
  const fs::path folder = fs::path(stacked.files.back()).parent_path();
  std::vector<std::string> names;
  for (const std::string& file : stacked.files) names.push_back(fs::path(file).lexically_relative(folder).string());
  YAML::Emitter merged;
  merged << stacked.root;
  return fmt::format("{}{}# {} merged into one (`extends:`), so that it runs saved anywhere.\n{}\n",
                     first.rfind('#', 0) == 0 ? first + "\n" : "", first.rfind('#', 0) == 0 ? "#\n" : "",
                     fmt::join(names, " + "), merged.c_str());
}

}  // namespace gputrain::config::detail

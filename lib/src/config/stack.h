#pragma once
// Configs that build on configs: `extends:` inside a file and --config given
// several times. Each file's document is merged over the ones before it (maps
// key by key, lists and scalars replaced), and every key path remembers the
// file, line and column its winning value came from.
#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <vector>

#include "node_reader.h"

namespace gputrain::config::detail {

// One file's document as parsed; `origin` names it in messages, `path` finds
// the files it extends (relative to its folder).
struct Document {
  YAML::Node root;
  std::string origin;
  std::string path;
};

// Reads and parses one file named by --config or by an `extends:` entry
// (load.cpp's reader: size limits, one document, malformed YAML).
using ReadDocument = std::function<Document(const std::string& path)>;

// The documents merged, in order: `marks` holds the position of every key
// path's winning value, for NodeReader (as --set's marks are), and is empty
// when only one document took part (its nodes' own marks say where).
struct Stacked {
  YAML::Node root;
  std::string origin;  // the last file given: where a message about the config as a whole points
  OverrideMarks marks;
  std::vector<std::string> files;  // every file that took part, bases first
};

// `tops` are --config's documents, later over earlier; each one's
// `extends:` (a file name or a list of them, relative to the file, earlier
// under later and all under the file itself) is read through `read` and
// removed. ConfigError at the `extends` entry for a file that is missing or
// a cycle, and at the value for a key whose kind (a mapping or not) differs
// from what the files under it give.
Stacked stack_documents(const std::vector<Document>& tops, const ReadDocument& read);

// The merged document as YAML text for a config that extends others, so that
// it runs saved anywhere (`gputrain configs NAME`): its first comment line,
// a note naming the files merged, then the merged keys. A config without
// `extends:` is returned as written.
std::string stacked_text(const std::string& text, const Stacked& stacked);

}  // namespace gputrain::config::detail

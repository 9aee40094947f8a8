#include "gputrain/config/source_map.h"

namespace gputrain::config {

SourceMark SourceMap::at(const std::string& key) const {
  std::string path = key;
  while (true) {
    if (auto it = marks_.find(path); it != marks_.end()) return it->second;
    const auto dot = path.rfind('.');
    if (dot == std::string::npos) return {};
    path.resize(dot);
  }
}

SourceMark SourceMap::exact(const std::string& key) const {
  const auto it = marks_.find(key);
  return it == marks_.end() ? SourceMark{} : it->second;
}

}  // namespace gputrain::config

#pragma once
#include <map>
#include <string>

#include "gputrain/common/error.h"

namespace gputrain::config {

// Key path ("data.batch_size") -> where its value was written, so errors found
// after loading still point into the file or at the --set that gave it.
class SourceMap {
 public:
  void record(const std::string& key, SourceMark mark) { marks_[key] = std::move(mark); }
  // The mark of the key, else of its nearest recorded parent, else unknown.
  SourceMark at(const std::string& key) const;
  // The mark of the key itself: unknown when neither the file nor --set gave it.
  SourceMark exact(const std::string& key) const;

 private:
  std::map<std::string, SourceMark> marks_;
};

}  // namespace gputrain::config

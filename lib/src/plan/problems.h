#pragma once
// How plan/ runs a part of a resolution: strict, or collecting every problem.
#include <string>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/config/config_errors.h"
#include "gputrain/config/source_map.h"

namespace gputrain::plan {

// Strict (no list): a part's problem throws. Collecting: it is listed, each of
// a config's errors on a line, and the part reports that it was refused.
// Either way a part's ConfigError that names only its key (a device the
// machine lacks, a strategy it cannot run, a model that does not fit the data,
// a loss, an optimizer) is placed at the key's line here, in one place.
class Problems {
 public:
  Problems(std::vector<std::string>* collected, const config::SourceMap& sources)
      : collected_(collected), sources_(sources) {}

  bool collecting() const { return collected_ != nullptr; }

  // Problems a part found and worded itself: listed, or the first thrown (UserError).
  void found(const std::vector<std::string>& problems) {
    if (problems.empty()) return;
    if (!collected_) throw UserError(problems.front());
    collected_->insert(collected_->end(), problems.begin(), problems.end());
  }

  template <class Part>
  bool attempt(Part&& part) {
    auto located = [&] {
      try {
        part();
      } catch (const config::ConfigErrors&) {
        throw;
      } catch (const ConfigError& e) {
        if (e.where().known()) throw;
        throw e.located(sources_.at(e.key()));
      }
    };
    if (collected_) return config::collect_refusal(*collected_, located);
    located();
    return true;
  }

 private:
  std::vector<std::string>* collected_;
  const config::SourceMap& sources_;
};

}  // namespace gputrain::plan

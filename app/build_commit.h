#pragma once
// The commit gputrain was built from (cmake/BuildCommit.cmake writes its
// definition at every build): a short hash, "-dirty" after it when the tree
// had uncommitted changes, or "unknown" for a build outside a git checkout.

namespace gputrain::app {

const char* build_commit();

}  // namespace gputrain::app

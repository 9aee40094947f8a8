// The precompiled header of every target that uses LibTorch (CMakeLists.txt):
// ATen's headers are most of each file's compile time, so they are parsed once.
// Kept to what nearly every file includes: a larger header costs every file
// more to load than the few that use the rest would save.
#pragma once
#include <fmt/format.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#pragma once
// The file a command writes (--out), checked before the command reads its
// inputs: a command must not destroy its own inputs, nor another file unasked.
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gputrain {

// An input of a command, as an option names it: {"--checkpoint", "run/best.ckpt"},
// or a folder whose files the command reads: {"--input", "images/"}.
using NamedPath = std::pair<std::string, std::filesystem::path>;

// UserError (exit 2) when `out` is empty, when it is one of `inputs` under any
// name (std::filesystem::equivalent: the same path, a symbolic or hard link),
// when it is an existing file inside an input that is a folder (through
// symbolic links too), or when it exists and `force` is false. An input is
// never an output, `force` or not. `option` names it ("--out").
// Defined in files.cpp.
void check_output_file(const std::filesystem::path& out, const std::vector<NamedPath>& inputs, bool force,
                       std::string_view option = "--out");

}  // namespace gputrain

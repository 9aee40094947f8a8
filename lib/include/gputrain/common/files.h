#pragma once
// Writing a file so that a failure part-way (a full disk, say) leaves the
// previous version whole.
#include <string>
#include <string_view>

namespace gputrain {

// Writes `bytes` to `path`.tmp, then renames it over `path`: a reader sees
// the old file or the new one, never a part. On failure removes the temporary
// file and throws Error (exit code 1): "<path>: cannot write the <what>: <reason>".
void write_file_atomically(const std::string& path, std::string_view bytes, std::string_view what);

}  // namespace gputrain

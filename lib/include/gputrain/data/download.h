#pragma once
// `gputrain datasets download`: the public data sets the shipped configs name,
// fetched from their official URLs, each file checked against its published
// SHA-256 before it takes its final name.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gputrain/common/error.h"

namespace gputrain::data {

// A download that failed on the way: no network, a server's error, a file
// that is not the published one. Exit code 1, not 2: nothing the user typed
// is wrong, the same command may succeed later (it resumes what it has), and
// a script can tell this from its own mistakes (2) to retry only this.
class DownloadError : public Error {
 public:
  explicit DownloadError(const std::string& message) : Error(ExitCode::kRuntime, message) {}
};

struct RemoteFile {
  std::string name;  // on the server and on disk: "train-images-idx3-ubyte.gz"
  std::string url;
  int64_t size = 0;                 // bytes; 0: unknown
  std::vector<std::string> sha256;  // the digests it may have (lowercase hex), at least one
};

struct RemoteSet {
  std::string name;                    // as data.dataset says it: "fashion_mnist"
  std::filesystem::path default_root;  // where --root defaults to: where the configs look, or beside them
  std::vector<RemoteFile> files;
  // Set: `files` is one .tar.gz whose regular files are unpacked into the root
  // (their top folder dropped), and these are the ones the reader needs.
  std::vector<std::string> unpacked;
};

// The built-in table: fashion_mnist, mnist and cifar10 (where each URL and
// checksum comes from is written beside it, in download.cpp).
std::vector<RemoteSet> dataset_catalog();

// The table with `mirror` (GPUTRAIN_DATASETS_MIRROR) in place of the official
// servers: each file at <mirror>/<set>/<file name>, checksums unchanged.
std::vector<RemoteSet> with_mirror(std::vector<RemoteSet> sets, std::string_view mirror);

// The table with the sets a catalog file (GPUTRAIN_DATASETS_CATALOG) lists in
// place of the built-in ones: lines of `set file url size sha256[,sha256...]`
// separated by white space, '#' comments. UserError (exit 2) naming the line.
std::vector<RemoteSet> with_catalog_file(std::vector<RemoteSet> sets, const std::filesystem::path& catalog);

// The set named `name`; UserError (exit 2) naming the sets otherwise.
const RemoteSet& find_remote_set(const std::vector<RemoteSet>& sets, std::string_view name);

struct DownloadOptions {
  std::filesystem::path root;     // where the set's files go
  bool progress = false;          // draw a progress bar on standard error (a terminal)
  std::string ca_bundle;          // CA certificates for https; "": the first of the usual places that exists
  int attempts = 3;               // tries per file when the connection breaks; each resumes
  long low_speed_timeout_s = 60;  // a transfer slower than 1 byte/s this long counts as broken
};

struct DownloadSummary {
  int fetched = 0;        // files downloaded (or finished) now
  int already_there = 0;  // files that were already in the root, checked
  int64_t bytes = 0;      // bytes received now
};

// Downloads `set` into options.root, file by file: <name>.part grows (a
// partial one from an earlier run is continued with an HTTP Range request),
// is checked against its size and SHA-256, then renamed to <name>; an archive
// is then unpacked, each member written atomically. A file already in the root
// with a published digest is kept. DownloadError (exit 1) when the network or
// the server fails, with the URL and what to do; UserError (exit 2) for a root
// that cannot be written or a file in it that is not the published one.
DownloadSummary download_dataset(const RemoteSet& set, const DownloadOptions& options);

// The SHA-256 of a file, lowercase hex. Error when it cannot be read.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace gputrain::data

#include "gputrain/data/download.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "gputrain/common/files.h"
#include "gputrain/common/strings.h"
#include "readers/http_get.h"

namespace gputrain::data {

namespace fs = std::filesystem;

namespace {

// Where the checksums come from. No data set's own site publishes SHA-256s:
// Fashion-MNIST's README and the CIFAR-10 page give MD5s, MNIST's site none.
// These SHA-256s are the ones TensorFlow Datasets publishes for the same URLs
// (tensorflow_datasets/url_checksums/{fashion_mnist,mnist,cifar10}.txt, with
// the same sizes). Fashion-MNIST also lists the SHA-256 of Debian's copy
// (dataset-fashion-mnist, /usr/share/datasets/fashion-mnist): the package
// re-wrote each gzip header without the original file name (each file is
// 23-24 bytes shorter, the length of that name), so a mirror of Debian's
// files is accepted too.
const std::string kFashionMnistUrl = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/";
// MNIST's home (yann.lecun.com/exdb/mnist) no longer serves the files reliably;
// torchvision and TensorFlow fetch them from mirrors, and this is TensorFlow's.
const std::string kMnistUrl = "https://storage.googleapis.com/cvdf-datasets/mnist/";
const std::string kCifar10Url = "https://www.cs.toronto.edu/~kriz/";

std::vector<RemoteSet> built_in() {
  return {
      {"cifar10",
       "datasets/cifar-10-batches-bin",
       {{"cifar-10-binary.tar.gz",
         kCifar10Url + "cifar-10-binary.tar.gz",
         170052171,
         {"c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd"}}},
       {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin",
        "test_batch.bin"}},
      {"fashion_mnist",
       "datasets/fashion-mnist",
       {{"train-images-idx3-ubyte.gz",
         kFashionMnistUrl + "train-images-idx3-ubyte.gz",
         26421880,
         {"3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
          "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7"}},
        {"train-labels-idx1-ubyte.gz",
         kFashionMnistUrl + "train-labels-idx1-ubyte.gz",
         29515,
         {"a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
          "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056"}},
        {"t10k-images-idx3-ubyte.gz",
         kFashionMnistUrl + "t10k-images-idx3-ubyte.gz",
         4422102,
         {"346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
          "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa"}},
        {"t10k-labels-idx1-ubyte.gz",
         kFashionMnistUrl + "t10k-labels-idx1-ubyte.gz",
         5148,
         {"67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
          "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05"}}},
       {}},
      {"mnist",
       "datasets/mnist",
       {{"train-images-idx3-ubyte.gz",
         kMnistUrl + "train-images-idx3-ubyte.gz",
         9912422,
         {"440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"}},
        {"train-labels-idx1-ubyte.gz",
         kMnistUrl + "train-labels-idx1-ubyte.gz",
         28881,
         {"3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"}},
        {"t10k-images-idx3-ubyte.gz",
         kMnistUrl + "t10k-images-idx3-ubyte.gz",
         1648877,
         {"8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"}},
        {"t10k-labels-idx1-ubyte.gz",
         kMnistUrl + "t10k-labels-idx1-ubyte.gz",
         4542,
         {"f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"}}},
       {}},
  };
}

bool is_sha256(std::string_view text) {
  return text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

bool published(const RemoteFile& file, const std::string& digest) {
  for (const std::string& expected : file.sha256) {
    if (expected == digest) return true;
  }
  return false;
}

int64_t file_size(int fd) {
  struct stat info {};
  return ::fstat(fd, &info) == 0 ? static_cast<int64_t>(info.st_size) : -1;
}

// An open file descriptor, closed at scope exit.
struct FileDescriptor {
  explicit FileDescriptor(int f) : fd(f) {}
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int fd;
};

[[noreturn]] void cannot_write(const fs::path& path, int error) {
  throw Error(write_error_code(error), fmt::format("{}: cannot write: {}", path.string(), std::strerror(error)));
}

// Fetches `file` into <root>/<name>.part, resuming it, until it is whole or
// the attempts are spent. Returns the bytes received.
int64_t fetch_part(const RemoteFile& file, const fs::path& part, const DownloadOptions& options) {
  const FileDescriptor out(::open(part.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (out.fd < 0) cannot_write(part, errno);
  // Two downloads into one root would interleave their bytes.
  if (::flock(out.fd, LOCK_EX | LOCK_NB) != 0) {
    throw UserError(fmt::format("{}: another gputrain is downloading into it; wait for it to finish", part.string()));
  }
  int64_t received = 0;
  for (int attempt = 1;; ++attempt) {
    int64_t have = file_size(out.fd);
    if (file.size > 0 && have > file.size) {  // not the published file: start again
      if (::ftruncate(out.fd, 0) != 0) cannot_write(part, errno);
      have = 0;
    }
    if (file.size > 0 && have == file.size) return received;  // an earlier run got it all
    if (have > 0) spdlog::info("{}: continuing at byte {} of {}", file.name, have, file.size > 0 ? file.size : -1);
    detail::HttpGetOptions get;
    get.label = file.name;
    get.total = file.size;
    get.progress = options.progress;
    get.ca_bundle = options.ca_bundle;
    get.low_speed_timeout_s = options.low_speed_timeout_s;
    const detail::HttpGetResult result = detail::http_get(file.url, out.fd, have, get);
    received += result.received;
    if (result.complete) break;
    if (attempt >= options.attempts) {
      throw DownloadError(fmt::format(
          "downloading {} broke off {} times, the last at byte {}{} ({}); {} is kept: run the same command again to "
          "continue from there",
          file.url, attempt, file_size(out.fd), file.size > 0 ? fmt::format(" of {}", file.size) : "", result.why,
          part.string()));
    }
    spdlog::warn("{}: the connection broke at byte {} ({}); continuing", file.name, file_size(out.fd), result.why);
  }
  if (::fsync(out.fd) != 0) cannot_write(part, errno);
  return received;
}

// A .part that is whole but wrong is removed: continuing from it could never succeed.
// The digest decides, not the size: a mirror of Debian's copy is a few bytes
// shorter than the published file (download.cpp's table says why).
void check_part(const RemoteFile& file, const fs::path& part) {
  const std::string digest = sha256_file(part);
  if (published(file, digest)) return;
  std::error_code error;
  const auto size = static_cast<int64_t>(fs::file_size(part, error));
  fs::remove(part, error);
  if (file.size > 0 && size < file.size * 99 / 100) {
    throw DownloadError(
        fmt::format("{} sent {} bytes where the published file has {}; what came is removed: run the "
                    "same command again, or use another mirror (GPUTRAIN_DATASETS_MIRROR)",
                    file.url, size, file.size));
  }
  throw DownloadError(
      fmt::format("{}: the file downloaded has SHA-256 {}, not the published {}: the server sent "
                  "something else (a damaged copy, or another version); it is removed. Run the "
                  "same command again, or use another mirror (GPUTRAIN_DATASETS_MIRROR)",
                  file.url, digest, join_choices(file.sha256)));
}

// A number in a tar header: octal digits, space- or NUL-terminated.
int64_t tar_number(const char* field, std::size_t width) {
  int64_t value = 0;
  for (std::size_t i = 0; i < width && field[i] >= '0' && field[i] <= '7'; ++i) value = value * 8 + (field[i] - '0');
  return value;
}

// Unpacks the regular files of a .tar.gz into `root`, their first folder
// dropped ("cifar-10-batches-bin/data_batch_1.bin" -> root/data_batch_1.bin),
// each written atomically. Returns the names written.
std::vector<std::string> unpack_tar_gz(const fs::path& archive, const fs::path& root) {
  std::unique_ptr<gzFile_s, decltype(&gzclose)> in(gzopen(archive.c_str(), "rb"), &gzclose);
  if (!in) throw DataError(fmt::format("{}: cannot open: {}", archive.string(), std::strerror(errno)));
  const auto read_exactly = [&](char* into, std::size_t bytes) {
    const int n = gzread(in.get(), into, static_cast<unsigned>(bytes));
    if (n != static_cast<int>(bytes)) {
      throw DataError(
          fmt::format("{}: the archive ends early; remove it and run the same command again", archive.string()));
    }
  };
  constexpr std::size_t kBlock = 512;
  std::vector<std::string> written;
  std::array<char, kBlock> header{};
  std::vector<char> buffer(1 << 20);
  for (;;) {
    read_exactly(header.data(), kBlock);
    if (header[0] == '\0') break;  // the end: a zero block
    const std::string name(header.data(), strnlen(header.data(), 100));
    const int64_t size = tar_number(header.data() + 124, 12);
    const char type = header[156];
    const std::string member = name.substr(name.find('/') == std::string::npos ? 0 : name.find('/') + 1);
    const bool regular =
        (type == '0' || type == '\0') && !member.empty() && member.find('/') == std::string::npos && member != "..";
    int64_t left = size;
    const auto copy = [&](const ByteSink& sink) {
      while (left > 0) {
        const auto piece = static_cast<std::size_t>(std::min<int64_t>(left, static_cast<int64_t>(buffer.size())));
        read_exactly(buffer.data(), piece);
        if (sink) sink(std::string_view(buffer.data(), piece));
        left -= static_cast<int64_t>(piece);
      }
    };
    if (regular) {
      write_atomically_in_pieces(root / member, copy);
      written.push_back(member);
    } else {
      copy(nullptr);  // a folder, or a member in a subfolder: skipped
    }
    const int64_t padding = (static_cast<int64_t>(kBlock) - size % static_cast<int64_t>(kBlock)) % kBlock;
    read_exactly(buffer.data(), static_cast<std::size_t>(padding));
  }
  return written;
}

// Where Linux distributions keep their CA certificates: the bundled libcurl
// knows only its build machine's (Debian's) place, the first one.
std::string system_ca_bundle() {
  for (const char* path :
       {"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem"}) {
    if (::access(path, R_OK) == 0) return path;
  }
  return "";
}

}  // namespace

std::vector<RemoteSet> dataset_catalog() { return built_in(); }

std::vector<RemoteSet> with_mirror(std::vector<RemoteSet> sets, std::string_view mirror) {
  std::string base(mirror);
  while (!base.empty() && base.back() == '/') base.pop_back();
  for (RemoteSet& set : sets) {
    for (RemoteFile& file : set.files) file.url = fmt::format("{}/{}/{}", base, set.name, file.name);
  }
  return sets;
}

std::vector<RemoteSet> with_catalog_file(std::vector<RemoteSet> sets, const fs::path& catalog) {
  std::ifstream in(catalog);
  if (!in) throw UserError(fmt::format("{} (GPUTRAIN_DATASETS_CATALOG): cannot read it", catalog.string()));
  std::vector<std::string> replaced;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string text(trim(std::string_view(line).substr(0, line.find('#'))));
    if (text.empty()) continue;
    std::istringstream fields(text);
    std::string set_name, name, url, size, digests;
    fields >> set_name >> name >> url >> size >> digests;
    const auto where = [&] { return fmt::format("{}:{} (GPUTRAIN_DATASETS_CATALOG)", catalog.string(), number); };
    if (digests.empty()) {
      throw UserError(fmt::format("{}: write `set file url size sha256[,sha256...]`", where()));
    }
    RemoteFile file{name, url, 0, split(digests, ',')};
    try {
      file.size = std::stoll(size);
    } catch (const std::exception&) {
      throw UserError(fmt::format("{}: the size '{}' is not a number of bytes", where(), size));
    }
    for (const std::string& digest : file.sha256) {
      if (!is_sha256(digest)) {
        throw UserError(fmt::format("{}: '{}' is not a SHA-256 (64 lowercase hex digits)", where(), digest));
      }
    }
    auto set = std::find_if(sets.begin(), sets.end(), [&](const RemoteSet& s) { return s.name == set_name; });
    if (set == sets.end()) {
      std::vector<std::string> names;
      for (const RemoteSet& s : sets) names.push_back(s.name);
      throw UserError(fmt::format("{}: {}", where(), unknown_choice(set_name, names)));
    }
    if (std::find(replaced.begin(), replaced.end(), set_name) == replaced.end()) {
      set->files.clear();  // the catalog's files replace the set's
      replaced.push_back(set_name);
    }
    set->files.push_back(std::move(file));
  }
  return sets;
}

const RemoteSet& find_remote_set(const std::vector<RemoteSet>& sets, std::string_view name) {
  std::vector<std::string> names;
  for (const RemoteSet& set : sets) {
    if (set.name == name) return set;
    names.push_back(set.name);
  }
  throw UserError(fmt::format("datasets download: {}", unknown_choice(name, names)));
}

std::string sha256_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot read: {}", path.string(), std::strerror(errno)));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  GPUTRAIN_CHECK(context && EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) == 1, "SHA-256 is unavailable");
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    EVP_DigestUpdate(context.get(), buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw UserError(fmt::format("{}: cannot read: {}", path.string(), std::strerror(errno)));
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_DigestFinal_ex(context.get(), digest.data(), &length);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

DownloadSummary download_dataset(const RemoteSet& set, const DownloadOptions& options) {
  std::error_code error;
  fs::create_directories(options.root, error);
  if (error || !fs::is_directory(options.root)) {
    throw UserError(fmt::format("--root {}: cannot create the folder: {}", options.root.string(),
                                error ? error.message() : "a file is in the way"));
  }
  DownloadOptions resolved = options;
  if (resolved.ca_bundle.empty()) resolved.ca_bundle = system_ca_bundle();
  DownloadSummary summary;
  const bool archive = !set.unpacked.empty();
  if (archive) {
    bool all_there = true;
    for (const std::string& name : set.unpacked) all_there = all_there && fs::exists(options.root / name);
    if (all_there) {
      spdlog::info("{}: the {} files are already in {}", set.name, set.unpacked.size(), options.root.string());
      summary.already_there = static_cast<int>(set.unpacked.size());
      return summary;
    }
  }
  for (const RemoteFile& file : set.files) {
    const fs::path target = options.root / file.name;
    if (fs::exists(target)) {
      const std::string digest = sha256_file(target);
      if (!published(file, digest)) {
        throw UserError(
            fmt::format("{} is there already but is not the published file (SHA-256 {}, published {}); "
                        "move it away and run the same command again",
                        target.string(), digest, join_choices(file.sha256)));
      }
      ++summary.already_there;
    } else {
      const fs::path part = options.root / (file.name + ".part");
      try {
        summary.bytes += fetch_part(file, part, resolved);
      } catch (const DownloadError&) {
        if (fs::exists(part, error) && fs::file_size(part, error) == 0) fs::remove(part, error);  // nothing to resume
        throw;
      }
      check_part(file, part);
      fs::rename(part, target, error);
      if (error) cannot_write(target, error.value());
      sync_directory(options.root);
      ++summary.fetched;
      spdlog::info("{}: {} checked (SHA-256) and written to {}", set.name, file.name, target.string());
    }
    if (archive) {
      const std::vector<std::string> written = unpack_tar_gz(target, options.root);
      for (const std::string& name : set.unpacked) {
        if (std::find(written.begin(), written.end(), name) == written.end()) {
          throw DataError(
              fmt::format("{}: the archive holds no {}: it is not the {} archive", target.string(), name, set.name));
        }
      }
      fs::remove(target, error);  // unpacked: the archive is no longer needed
      spdlog::info("{}: unpacked {} files into {}", set.name, written.size(), options.root.string());
    }
  }
  return summary;
}

}  // namespace gputrain::data

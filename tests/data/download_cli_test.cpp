// `gputrain datasets download` through the real binary, against a local HTTP
// server (tests/data/download_server.py on a free loopback port) that serves
// Debian's real Fashion-MNIST files and a generated CIFAR-10 archive, and can
// cut a file short, damage it or stop in the middle of it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "gputrain/data/dataset.h"
#include "gputrain/data/download.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::data {
namespace {

namespace fs = std::filesystem;
using gputrain::testing::GputrainProcess;
using gputrain::testing::ProcessResult;
using gputrain::testing::read_text;
using gputrain::testing::run_gputrain;
using gputrain::testing::TempDir;

const fs::path kDebianFashionMnist = "/usr/share/datasets/fashion-mnist";
const std::vector<std::string> kIdxFiles = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                            "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};

std::string server_script() { return std::string(gputrain::testing::kSourceDir) + "/tests/data/download_server.py"; }

class DatasetsDownload : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kDebianFashionMnist / kIdxFiles[0])) {
      GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed (scripts/setup.sh installs it)";
    }
    fs::create_directories(served_ / "fashion_mnist");
    for (const std::string& name : kIdxFiles) {
      fs::create_symlink(kDebianFashionMnist / name, served_ / "fashion_mnist" / name);
    }
  }

  // Starts the server in `mode` (download_server.py's); the mirror URL.
  std::string serve(const std::string& mode) {
    const fs::path port_file = dir_ / "port";
    server_ = std::make_unique<GputrainProcess>(
        std::vector<std::string>{server_script(), "serve", served_.string(), port_file.string(), log_.string(), mode},
        std::map<std::string, std::string>{}, dir_.path().string(), gputrain::testing::ChildSetup{},
        gputrain::testing::venv_python().string());
    EXPECT_TRUE(gputrain::testing::wait_until([&] { return fs::exists(port_file); }, std::chrono::seconds(30)))
        << server_->err_so_far();
    return "http://127.0.0.1:" + read_text(port_file);
  }

  ProcessResult download(const std::string& set, const std::map<std::string, std::string>& env) {
    return run_gputrain({"datasets", "download", set, "--root", root_.string()}, env, dir_.path().string());
  }

  // The requests the server saw, one "<path> <Range or ->" line each.
  std::string requests() const { return read_text(log_); }

  // Whether root_ holds no file but `names` (no .part, no temporary file).
  void expect_only(const std::vector<std::string>& names) const {
    std::vector<std::string> found;
    if (fs::exists(root_)) {
      for (const auto& entry : fs::directory_iterator(root_)) found.push_back(entry.path().filename().string());
    }
    std::sort(found.begin(), found.end());
    std::vector<std::string> expected = names;
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(found, expected);
  }

  TempDir dir_{"gputrain-download"};
  fs::path served_ = dir_ / "served";
  fs::path root_ = dir_ / "data";
  fs::path log_ = dir_ / "requests.log";
  std::unique_ptr<GputrainProcess> server_;
};

TEST_F(DatasetsDownload, FetchesFashionMnistChecksAndKeepsIt) {
  const std::map<std::string, std::string> env{{"GPUTRAIN_DATASETS_MIRROR", serve("good")}};
  const ProcessResult r = download("fashion_mnist", env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& name : kIdxFiles) EXPECT_EQ(read_text(root_ / name), read_text(kDebianFashionMnist / name));
  expect_only(kIdxFiles);
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << "a progress bar where standard error is no terminal";
  EXPECT_NE(r.err.find("data.root: " + root_.string()), std::string::npos) << r.err;
  config::DataConfig config;
  config.dataset = config::DatasetName::kFashionMnist;
  config.root = root_.string();
  EXPECT_EQ(make_dataset(config, Split::kTrain, 0)->info().samples, 60000);

  // Again: every file is there and checked, nothing is fetched.
  const std::string before = requests();
  const ProcessResult again = download("fashion_mnist", env);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(requests(), before);
  EXPECT_NE(again.err.find("0 files fetched"), std::string::npos) << again.err;
}

TEST_F(DatasetsDownload, UnpacksACifarArchiveFromACatalog) {
  const fs::path made = dir_ / "made";
  const ProcessResult make =
      run_gputrain({"datasets", "make-cifar", "--out", made.string(), "--train", "20", "--test", "10"});
  ASSERT_EQ(make.exit_code, 0) << make.err;
  fs::create_directories(served_ / "cifar");
  const ProcessResult packed = [&] {
    GputrainProcess python({server_script(), "pack", made.string(),
                            (served_ / "cifar" / "cifar-10-binary.tar.gz").string(), "cifar-10-batches-bin"},
                           {}, dir_.path().string(), {}, gputrain::testing::venv_python().string());
    return python.wait();
  }();
  ASSERT_EQ(packed.exit_code, 0) << packed.err;
  std::istringstream size_and_digest(packed.out);
  std::string size, digest;
  size_and_digest >> size >> digest;
  const std::string url = serve("good") + "/cifar/cifar-10-binary.tar.gz";
  const fs::path catalog =
      gputrain::testing::write_text(dir_ / "catalog.tsv", "# a stand-in CIFAR-10\ncifar10 cifar-10-binary.tar.gz " +
                                                              url + " " + size + " " + digest + "\n");
  const ProcessResult r = download("cifar10", {{"GPUTRAIN_DATASETS_CATALOG", catalog.string()}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                           "data_batch_5.bin", "test_batch.bin"}) {
    EXPECT_EQ(read_text(root_ / name), read_text(made / name)) << name;
  }
  EXPECT_FALSE(fs::exists(root_ / "cifar-10-binary.tar.gz"));  // unpacked, then removed
  config::DataConfig config;
  config.dataset = config::DatasetName::kCifar10;
  config.root = root_.string();
  EXPECT_EQ(make_dataset(config, Split::kTrain, 0)->info().samples, 20);
}

TEST_F(DatasetsDownload, RefusesATruncatedFileAndKeepsNothing) {
  const ProcessResult r = download("fashion_mnist", {{"GPUTRAIN_DATASETS_MIRROR", serve("truncate")}});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("/fashion_mnist/train-images-idx3-ubyte.gz sent 13210928 bytes where the published file "
                       "has 26421880"),
            std::string::npos)
      << r.err;
  expect_only({});
}

TEST_F(DatasetsDownload, RefusesAWrongChecksumAndKeepsNothing) {
  const ProcessResult r = download("fashion_mnist", {{"GPUTRAIN_DATASETS_MIRROR", serve("corrupt")}});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("train-images-idx3-ubyte.gz: the file downloaded has SHA-256"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84"), std::string::npos) << r.err;
  expect_only({});
}

TEST_F(DatasetsDownload, ContinuesWhereTheServerStopped) {
  const ProcessResult r = download("fashion_mnist", {{"GPUTRAIN_DATASETS_MIRROR", serve("stop")}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& name : kIdxFiles) EXPECT_EQ(read_text(root_ / name), read_text(kDebianFashionMnist / name));
  expect_only(kIdxFiles);
  // The server stopped half-way (26421856 / 2 bytes of Debian's file); the second request asked for the rest.
  EXPECT_NE(requests().find("fashion_mnist/train-images-idx3-ubyte.gz -\n"
                            "fashion_mnist/train-images-idx3-ubyte.gz bytes=13210928-\n"),
            std::string::npos)
      << requests();
  EXPECT_NE(r.err.find("the connection broke at byte 13210928"), std::string::npos) << r.err;
}

TEST_F(DatasetsDownload, ContinuesThePartAnEarlierRunLeft) {
  const std::string labels = read_text(kDebianFashionMnist / "train-labels-idx1-ubyte.gz");
  gputrain::testing::write_text(root_ / "train-labels-idx1-ubyte.gz.part", labels.substr(0, 1000));
  const ProcessResult r = download("fashion_mnist", {{"GPUTRAIN_DATASETS_MIRROR", serve("good")}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_text(root_ / "train-labels-idx1-ubyte.gz"), labels);
  EXPECT_NE(requests().find("fashion_mnist/train-labels-idx1-ubyte.gz bytes=1000-\n"), std::string::npos) << requests();
}

TEST_F(DatasetsDownload, NamesTheUrlAndTheFixWhenOffline) {
  const std::string closed = "http://127.0.0.1:" + std::to_string(gputrain::testing::free_port());
  const ProcessResult r = download("fashion_mnist", {{"GPUTRAIN_DATASETS_MIRROR", closed}});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot reach " + closed + "/fashion_mnist/train-images-idx3-ubyte.gz"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("set GPUTRAIN_DATASETS_MIRROR to a mirror you can reach"), std::string::npos) << r.err;
  expect_only({});  // nothing came: no empty .part left behind
}

TEST_F(DatasetsDownload, DrawsAProgressBarOnATerminal) {
  const std::string mirror = serve("good");
  // script(1) gives the command a terminal for its standard error.
  const std::string command =
      std::string(gputrain::testing::kGputrainBinary) + " datasets download fashion_mnist --root " + root_.string();
  GputrainProcess tty({"-qec", command, "/dev/null"}, {{"GPUTRAIN_DATASETS_MIRROR", mirror}}, dir_.path().string(), {},
                      "/usr/bin/script");
  const ProcessResult r = tty.wait();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\rtrain-images-idx3-ubyte.gz ["), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("] 100% 25.2 MiB of 25.2 MiB"), std::string::npos) << r.out;
}

TEST(DatasetsDownloadInput, UnknownSetOrBadCatalogExitsTwo) {
  TempDir dir;
  ProcessResult r = run_gputrain({"datasets", "download", "fashoin_mnist"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("did you mean 'fashion_mnist'"), std::string::npos) << r.err;

  const fs::path catalog = gputrain::testing::write_text(dir / "catalog.tsv", "mnist x http://h/x 10 abc\n");
  r = run_gputrain({"datasets", "download", "mnist", "--root", (dir / "d").string()},
                   {{"GPUTRAIN_DATASETS_CATALOG", catalog.string()}});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(catalog.string() + ":1 (GPUTRAIN_DATASETS_CATALOG): 'abc' is not a SHA-256"), std::string::npos)
      << r.err;
}

TEST(DatasetsDownloadInput, AFileThatIsNotThePublishedOneIsKeptAndNamed) {
  TempDir dir;
  gputrain::testing::write_text(dir / "d" / "train-images-idx3-ubyte.gz", "mine");
  const ProcessResult r = run_gputrain({"datasets", "download", "mnist", "--root", (dir / "d").string()},
                                       {{"GPUTRAIN_DATASETS_MIRROR", "http://127.0.0.1:1"}});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("train-images-idx3-ubyte.gz is there already but is not the published file"), std::string::npos)
      << r.err;
  EXPECT_EQ(read_text(dir / "d" / "train-images-idx3-ubyte.gz"), "mine");
}

TEST(DatasetsCatalog, EveryFileHasASizeAndSha256s) {
  for (const RemoteSet& set : dataset_catalog()) {
    EXPECT_FALSE(set.files.empty()) << set.name;
    for (const RemoteFile& file : set.files) {
      EXPECT_GT(file.size, 0) << file.name;
      EXPECT_EQ(file.url.substr(0, 4), "http") << file.url;
      EXPECT_EQ(file.url.substr(file.url.size() - file.name.size()), file.name) << file.url;
      ASSERT_FALSE(file.sha256.empty()) << file.name;
      for (const std::string& digest : file.sha256) {
        EXPECT_EQ(digest.find_first_not_of("0123456789abcdef"), std::string::npos) << digest;
        EXPECT_EQ(digest.size(), 64u) << digest;
      }
    }
  }
}

TEST(DatasetsCatalog, DebiansFashionMnistHasTheListedDigests) {
  const std::vector<RemoteSet> sets = dataset_catalog();
  const RemoteSet& set = find_remote_set(sets, "fashion_mnist");
  for (const RemoteFile& file : set.files) {
    const fs::path debian = kDebianFashionMnist / file.name;
    if (!fs::exists(debian)) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
    EXPECT_EQ(file.sha256.back(), sha256_file(debian)) << file.name;
  }
}

}  // namespace
}  // namespace gputrain::data

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "gputrain/common/strings.h"
#include "gputrain/config/load.h"
#include "gputrain/data/download.h"
#include "gputrain/data/export.h"
#include "gputrain/data/generate.h"

namespace gputrain::app {

namespace {

int run_download(const DatasetsArgs& args) {
  std::vector<data::RemoteSet> sets = data::dataset_catalog();
  if (args.mirror && !args.mirror->empty()) sets = data::with_mirror(std::move(sets), *args.mirror);
  if (args.catalog && !args.catalog->empty()) sets = data::with_catalog_file(std::move(sets), *args.catalog);
  const data::RemoteSet& set = data::find_remote_set(sets, args.dataset);
  data::DownloadOptions options;
  options.root = args.root.empty() ? set.default_root : std::filesystem::path(args.root);
  options.progress = ::isatty(STDERR_FILENO) == 1;
  options.ca_bundle = args.ca_bundle.value_or("");
  const data::DownloadSummary summary = data::download_dataset(set, options);
  spdlog::info(
      "{} is in {} ({} fetched, {}; {} already there). A config reads it with data.dataset: {} and "
      "data.root: {} (a relative path is relative to the folder gputrain runs in)",
      set.name, options.root.string(), count_of(summary.fetched, "file"), bytes_text(summary.bytes),
      summary.already_there, set.name, options.root.string());
  return 0;
}

}  // namespace

CLI::App* add_datasets_command(CLI::App& app, DatasetsArgs& args) {
  auto* datasets = app.add_subcommand(
      "datasets", "download the public data sets the configs name, write small learnable stand-ins, or export one");
  datasets->require_subcommand(1);
  auto* download = datasets->add_subcommand(
      "download",
      "fetch fashion_mnist, mnist or cifar10 from its official URL (GPUTRAIN_DATASETS_MIRROR=URL: from a mirror, "
      "as URL/<set>/<file>), check each file's SHA-256 and write it into --root; an interrupted download continues "
      "where it stopped");
  download->add_option("name", args.dataset, "fashion_mnist, mnist or cifar10")->required();
  download->add_option("--root", args.root,
                       "the folder to write (a config's data.root); default: datasets/fashion-mnist, datasets/mnist "
                       "or datasets/cifar-10-batches-bin");
  download->callback([&args] { args.format = "download"; });
  auto* cifar = datasets->add_subcommand(
      "make-cifar", "write CIFAR-10 binary files (data_batch_1..5.bin, test_batch.bin); see datasets/README.md");
  auto* idx = datasets->add_subcommand(
      "make-idx", "write the four (Fashion-)MNIST IDX files, 28x28 greyscale; see datasets/README.md");
  for (auto* make : {cifar, idx}) {
    make->add_option("--out", args.out, "directory to write (created if needed)")->required();
    make->add_option("--train", args.train, "training images (default: the real set's count)");
    make->add_option("--test", args.test, "test images (default: 10000)");
    make->add_option("--seed", args.seed, "seed of the class templates and the noise (default: 0)");
  }
  idx->add_flag("--gzip", args.gzip, "gzip-compress the files (.gz), as the official downloads are");
  auto* exporter = datasets->add_subcommand(
      "export",
      "write both splits of the config's data set as NumPy .npy files ({train,test}_{inputs,targets}.npy), or its "
      "images as {train,test}/<class>/<index>.png|jpg folders (what `dataset: image_folder` reads)");
  add_config_options(exporter, args.config, args.overrides);
  exporter->add_option("--out", args.out, "directory to write (created if needed)")->required();
  exporter->add_option("--format", args.file_format, "npy (default), png or jpeg")
      ->check(CLI::IsMember({"npy", "png", "jpeg"}));
  exporter->add_option("--quality", args.quality, "JPEG quality, 1-100 (default: 95)")->check(CLI::Range(1, 100));
  for (auto* command : {cifar, idx, exporter}) {
    command->add_flag("--force", args.force, "overwrite the files of a set already in --out");
  }
  cifar->callback([&args] { args.format = "cifar"; });
  idx->callback([&args] { args.format = "idx"; });
  exporter->callback([&args] { args.format = "export"; });
  return datasets;
}

int run_datasets(const DatasetsArgs& args) {
  if (args.format == "download") return run_download(args);
  if (args.format == "export") {
    const config::ExperimentConfig c = config::load_config(args.config, args.overrides).config;
    config::DataConfig source = c.data;
    const bool npy = args.file_format == "npy";
    if (npy) source.cache = config::ImageCache::kMemory;  // an .npy is written from the split in memory
    data::check_export_out(args.out, !npy, args.force);
    for (const data::Split split : {data::Split::kTrain, data::Split::kTest}) {
      const auto dataset = data::make_dataset(source, split, c.seed);
      if (npy) {
        data::export_npy(*dataset, args.out, split);
      } else {
        data::export_images(*dataset, args.out, split,
                            args.file_format == "png" ? data::ImageFormat::kPng : data::ImageFormat::kJpeg,
                            args.quality, args.force);
      }
      spdlog::info("wrote the {} {} samples of {} to {}", dataset->info().samples,
                   split == data::Split::kTrain ? "training" : "test", dataset->info().name, args.out);
    }
    return 0;
  }
  const bool cifar = args.format == "cifar";
  const data::GenerateOptions options{args.train.value_or(cifar ? 50000 : 60000), args.test.value_or(10000), args.seed,
                                      args.force};
  if (cifar) {
    data::write_cifar10_set(args.out, options);
  } else {
    data::write_idx_set(args.out, options, args.gzip);
  }
  spdlog::info("wrote {} training and {} test images ({}) to {}", options.train, options.test,
               cifar       ? "CIFAR-10 binary"
               : args.gzip ? "IDX, gzip"
                           : "IDX",
               args.out);
  return 0;
}

}  // namespace gputrain::app

// Loader throughput on a CIFAR-format directory, or on an image folder
// (dataset: image_folder, ROOT/train/<class>/...): samples/s that HostLoader
// delivers to a consumer that does nothing else, for each worker count, with
// pin_memory off and on, and with the seed recipe's augmentation off and on.
// An image folder is measured with its images decoded once and kept in memory
// (data.cache: memory) and decoded per batch in the workers (none), pin_memory off.
// Not a test: run it through scripts/bench/loader.sh, which writes the results.
//
//   gputrain_bench_loader ROOT [BATCH_SIZE=128] [EPOCHS=3]
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "gputrain/common/error.h"
#include "gputrain/data/host_loader.h"

namespace {

using gputrain::data::HostLoader;
using gputrain::data::LoaderOptions;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: gputrain_bench_loader ROOT [BATCH_SIZE=128] [EPOCHS=3]\n";
    return 2;
  }
  const int64_t batch_size = argc > 2 ? std::atoll(argv[2]) : 128;
  const int64_t epochs = argc > 3 ? std::atoll(argv[3]) : 3;
  spdlog::set_default_logger(spdlog::stderr_color_mt("bench"));  // stdout carries only the table
  try {
    gputrain::config::DataConfig config;
    config.root = argv[1];
    const bool folder = std::filesystem::is_directory(std::filesystem::path(config.root) / "train");
    config.dataset = folder ? gputrain::config::DatasetName::kImageFolder : gputrain::config::DatasetName::kCifar10;
    const auto caches = folder ? std::vector<gputrain::config::ImageCache>{gputrain::config::ImageCache::kMemory,
                                                                           gputrain::config::ImageCache::kNone}
                               : std::vector<gputrain::config::ImageCache>{gputrain::config::ImageCache::kMemory};
    std::cout << fmt::format(
        "batch size {}, {} timed epochs after one warm-up epoch, shuffled, normalised (mean "
        "0.5, std 0.5)\n\n",
        batch_size, epochs);
    if (!torch::cuda::is_available()) {
      std::cout << "CUDA is not available: pin_memory on falls back to ordinary (pageable) memory after one "
                   "warning, so its rows measure the same code path as pin_memory off.\n\n";
    }
    std::cout << "| images | num_workers | pin_memory | augment | samples/s | s/epoch | wait in next() s/epoch |\n"
                 "|---|---:|---|---|---:|---:|---:|\n";
    std::string loads;
    for (const auto cache : caches) {
      config.cache = cache;
      const auto load_start = std::chrono::steady_clock::now();
      const auto dataset = gputrain::data::make_dataset(config, gputrain::data::Split::kTrain, 0);
      const double load_seconds = seconds_since(load_start);
      const int64_t samples = dataset->info().samples;
      const std::string images = !folder                                        ? "CIFAR-10 binary"
                                 : cache == gputrain::config::ImageCache::kNone ? "decoded per batch"
                                                                                : "decoded at start";
      loads += fmt::format("- {}: {} training images from {}, ready in {:.2f} s\n", images, samples, config.root,
                           load_seconds);
      for (bool augment : {false, true}) {
        for (bool pin : folder ? std::vector<bool>{false} : std::vector<bool>{false, true}) {
          for (int64_t workers : {0, 1, 2, 4}) {
            LoaderOptions options;
            options.batch_size = batch_size;
            options.shuffle = true;
            options.num_workers = workers;
            options.pin_memory = pin;
            options.mean = {0.5};
            options.std = {0.5};
            options.random_crop = augment ? 4 : 0;
            options.hflip = augment;
            HostLoader stream(dataset, options);
            double wait = 0.0;
            std::chrono::steady_clock::time_point start;
            for (int64_t epoch = 0; epoch <= epochs; ++epoch) {
              if (epoch == 1) start = std::chrono::steady_clock::now();  // epoch 0 warms up
              stream.start_epoch(epoch);
              while (stream.next()) {
              }
              if (epoch > 0) wait += stream.wait_seconds();
            }
            const double elapsed = seconds_since(start);
            std::cout << fmt::format("| {} | {} | {} | {} | {:.0f} | {:.3f} | {:.3f} |\n", images, workers,
                                     pin ? "on" : "off", augment ? "crop 4 + hflip" : "off",
                                     static_cast<double>(samples * epochs) / elapsed,
                                     elapsed / static_cast<double>(epochs), wait / static_cast<double>(epochs));
          }
        }
      }
    }
    std::cout << "\n" << loads;
  } catch (const gputrain::Error& e) {
    std::cerr << e.what() << "\n";
    return static_cast<int>(e.code());
  }
  return 0;
}

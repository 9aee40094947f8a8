// dataset: image_folder, the layout torchvision's ImageFolder reads:
// <split>/<class>/<image>. Classes are the training folders in sorted order.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "gputrain/common/strings.h"
#include "gputrain/device/memory.h"
#include "images/image_files.h"
#include "readers/readers.h"

namespace gputrain::data::detail {

namespace fs = std::filesystem;

namespace {

constexpr const char* kName = "image_folder";
constexpr std::size_t kClassesLogged = 20;

// Runs body(i) for every i in [0, count) on all hardware threads. When some
// fail, rethrows what the lowest failing index threw (the error a sequential
// loop would have met first) after every thread has stopped.
void parallel_for(int64_t count, const std::function<void(int64_t)>& body) {
  std::atomic<int64_t> next{0};
  std::mutex mutex;
  int64_t failed_at = count;
  std::exception_ptr failure;
  auto work = [&] {
    for (int64_t i = next++; i < count; i = next++) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (i < failed_at) {
          failed_at = i;
          failure = std::current_exception();
        }
        next = count;
      }
    }
  };
  const auto threads = std::min<int64_t>(std::max(1U, std::thread::hardware_concurrency()), count);
  std::vector<std::thread> pool;
  try {
    for (int64_t t = 1; t < threads; ++t) pool.emplace_back(work);
  } catch (...) {
    next = count;
    for (std::thread& thread : pool) thread.join();
    throw;
  }
  work();
  for (std::thread& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

struct ClassFolder {
  std::string name;
  fs::path dir;
};

std::string layout_hint(const fs::path& dir) {
  return fmt::format("It must hold one folder per class, each of .png, .jpg or .jpeg images: {}/<class>/<image>",
                     dir.string());
}

// The class folders in `dir`, sorted by name; hidden ones skipped.
std::vector<ClassFolder> class_folders(const fs::path& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    throw DataError(fmt::format("{}: {} is not a directory. {}", kName, dir.string(), layout_hint(dir)));
  }
  std::vector<ClassFolder> classes;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (it->is_directory(error)) {
      classes.push_back({name, it->path()});
    } else if (is_image_file(it->path())) {
      throw DataError(fmt::format("{}: {} is in no class folder. {}", kName, it->path().string(), layout_hint(dir)));
    }
  }
  if (error) throw DataError(fmt::format("{}: cannot list {}: {}", kName, dir.string(), error.message()));
  if (classes.empty())
    throw DataError(fmt::format("{}: {} holds no class folders. {}", kName, dir.string(), layout_hint(dir)));
  std::sort(classes.begin(), classes.end(), [](const ClassFolder& a, const ClassFolder& b) { return a.name < b.name; });
  return classes;
}

std::string numbered_classes(const std::vector<std::string>& names) {
  std::vector<std::string> numbered;
  for (std::size_t i = 0; i < names.size() && i < kClassesLogged; ++i)
    numbered.push_back(fmt::format("{} {}", i, names[i]));
  if (names.size() > kClassesLogged) numbered.push_back(fmt::format("... {} {}", names.size() - 1, names.back()));
  return fmt::format("{}", fmt::join(numbered, ", "));
}

// The first image of a split stored in each colour model other than the
// split's (greyscale in an RGB set, CMYK, colour in a grey set) is logged as
// converted; the rest are converted alike without a line each.
class ConversionLog {
 public:
  explicit ConversionLog(int64_t channels) : channels_(channels) {}

  void note(StoredColour colour, const fs::path& file) {
    if (colour == StoredColour::kAsAsked || said_[static_cast<std::size_t>(colour)].exchange(true)) return;
    const char* stored = colour == StoredColour::kGrey   ? "greyscale"
                         : colour == StoredColour::kCmyk ? "CMYK"
                                                         : "colour";
    spdlog::info(
        "{}: {} is stored in {}, converted to {} as the data set's images are (data.channels: {}); other {} "
        "images are converted alike without a line each",
        kName, file.string(), stored, channels_ == 1 ? "greyscale" : "RGB", channels_, stored);
  }

 private:
  int64_t channels_;
  std::array<std::atomic<bool>, 4> said_{};
};

// `files` decoded to `shape` by `fit` on all hardware threads: uint8 [N, C, H, W], or undefined unless `keep`
// (decoded only to be checked). Under data.skip_bad_images (`errors` given) a file that cannot be decoded leaves
// its message in `errors` and zero pixels; else its DataError is thrown.
torch::Tensor decode_all(const std::vector<fs::path>& files, ImageShape image, const ImageFit& fit, int64_t max_pixels,
                         ConversionLog& log, bool keep = true, std::vector<std::string>* errors = nullptr) {
  torch::Tensor pixels;
  if (keep) {
    pixels =
        torch::zeros({static_cast<int64_t>(files.size()), image.channels, image.height, image.width}, torch::kUInt8);
  }
  uint8_t* out = keep ? pixels.data_ptr<uint8_t>() : nullptr;
  parallel_for(static_cast<int64_t>(files.size()), [&](int64_t i) {
    const fs::path& file = files[static_cast<std::size_t>(i)];
    std::vector<uint8_t> scratch(keep ? 0 : static_cast<std::size_t>(image.bytes()));
    try {
      log.note(decode_image(file, image, fit, max_pixels, keep ? out + i * image.bytes() : scratch.data()), file);
    } catch (const DataError& e) {
      if (errors == nullptr) throw DataError(fmt::format("{}; {}", e.what(), kUnreadableImageFix));
      (*errors)[static_cast<std::size_t>(i)] = e.what();
    }
  });
  return pixels;
}

class ImageFolderDataset final : public Dataset {
 public:
  ImageFolderDataset(DatasetInfo info, std::vector<fs::path> files, torch::Tensor targets, ImageFit fit,
                     int64_t max_pixels, std::shared_ptr<ConversionLog> log)
      : info_(std::move(info)),
        files_(std::move(files)),
        targets_(std::move(targets)),
        fit_(fit),
        max_pixels_(max_pixels),
        log_(std::move(log)) {}

  // The split decoded at start (data.cache: memory), as decode_all gave it.
  void keep_in_memory(torch::Tensor pixels) { inputs_ = std::move(pixels); }

  const DatasetInfo& info() const override { return info_; }
  const torch::Tensor& inputs() const override { return inputs_; }
  const torch::Tensor& targets() const override { return targets_; }
  bool resident() const override { return inputs_.defined(); }

  std::string describe_sample(int64_t index) const override {
    return fmt::format("{} sample {} ({})", info_.name, index, files_.at(static_cast<std::size_t>(index)).string());
  }

  void read_image(int64_t index, uint8_t* out) const override {
    if (resident()) return Dataset::read_image(index, out);
    const std::vector<int64_t>& s = info_.input_shape;
    const fs::path& file = files_.at(static_cast<std::size_t>(index));
    reading_sample(index, [&] { log_->note(decode_image(file, {s[0], s[1], s[2]}, fit_, max_pixels_, out), file); });
  }

  void read_resized_crop(int64_t index, const DrawCropBox& draw_box, uint8_t* out) const override {
    if (resident()) return Dataset::read_resized_crop(index, draw_box, out);
    const std::vector<int64_t>& s = info_.input_shape;
    const fs::path& file = files_.at(static_cast<std::size_t>(index));
    reading_sample(index, [&] {
      log_->note(decode_resized_crop(file, {s[0], s[1], s[2]}, draw_box, max_pixels_, out), file);
    });
  }

  const fs::path* sample_file(int64_t index) const override {
    return resident() ? nullptr : &files_.at(static_cast<std::size_t>(index));
  }

 private:
  DatasetInfo info_;
  std::vector<fs::path> files_;
  torch::Tensor targets_;
  torch::Tensor inputs_;  // undefined under data.cache: none
  ImageFit fit_;
  int64_t max_pixels_;                  // data.max_image_pixels
  std::shared_ptr<ConversionLog> log_;  // shared by the loader's worker threads
};

// Whether the decoded split stays in memory, and why (data.cache).
std::pair<bool, std::string> choose_cache(config::ImageCache cache, int64_t bytes) {
  if (cache != config::ImageCache::kAuto) return {cache == config::ImageCache::kMemory, "set"};
  const int64_t available = device::host_available_memory();
  const double gib = 1024.0 * 1024.0 * 1024.0;
  if (available < 0) return {true, "auto: the host's available memory is unknown"};
  const bool fits = bytes <= available / 4;
  return {fits, fmt::format("auto: {:.2f} GiB decoded, {} a quarter of the host's {:.2f} GiB available",
                            static_cast<double>(bytes) / gib, fits ? "at most" : "more than",
                            static_cast<double>(available) / gib)};
}

// read_image_header, its refusal with kUnreadableImageFix.
ImageShape readable_header(const fs::path& file, int64_t max_pixels) {
  try {
    return read_image_header(file, max_pixels);
  } catch (const DataError& e) {
    throw DataError(fmt::format("{}; {}", e.what(), kUnreadableImageFix));
  }
}

// Every image of `files` brought by `fit` to `reference`'s size `size`, checked
// before the first batch (as stored or after data.resize alone, when nothing
// decodes them all at start).
void require_one_size(const std::vector<fs::path>& files, const fs::path& reference, ImageShape size,
                      const ImageFit& fit, int64_t max_pixels) {
  parallel_for(static_cast<int64_t>(files.size()), [&](int64_t i) {
    const ImageShape stored = readable_header(files[static_cast<std::size_t>(i)], max_pixels);
    const auto [height, width] = fitted_size(stored, fit, size);
    if (height != size.height || width != size.width) {
      throw DataError(fmt::format(
          "{}: the image is {}x{}{}, not {}x{} as {}; {}", files[static_cast<std::size_t>(i)].string(), width, height,
          fit.shorter_side > 0 ? " after data.resize" : "", size.width, size.height, reference.string(),
          fit.shorter_side > 0 ? "set data.center_crop to crop them to one size"
                               : "set data.image_size to resize them all"));
    }
  });
}

// Whether `file`'s header reads within `max_pixels` (data.skip_bad_images looks for a first readable image).
DataError no_images(const fs::path& class_folder) {
  return DataError(
      fmt::format("{}: the class folder {} holds no .png, .jpg or .jpeg images", kName, class_folder.string()));
}

bool has_header(const fs::path& file, int64_t max_pixels) {
  try {
    read_image_header(file, max_pixels);
    return true;
  } catch (const DataError&) {
    return false;
  }
}

// data.skip_bad_images: the files with an error (each logged) left out of
// `files`, `labels` and `pixels`, and named in info.skipped.
void leave_out_unreadable(const std::vector<std::string>& errors, std::vector<fs::path>& files,
                          std::vector<int64_t>& labels, torch::Tensor& pixels, DatasetInfo& info) {
  std::vector<int64_t> kept;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (errors[i].empty()) {
      kept.push_back(static_cast<int64_t>(i));
      continue;
    }
    spdlog::warn("{}; left out (data.skip_bad_images)", errors[i]);
    info.skipped.push_back(files[i].string());
  }
  if (info.skipped.empty()) return;
  if (kept.empty()) {
    throw DataError(fmt::format("{}: none of the {} in {} can be read (data.skip_bad_images left every one out)", kName,
                                count_of(static_cast<int64_t>(files.size()), "image"), info.source));
  }
  std::vector<fs::path> kept_files;
  std::vector<int64_t> kept_labels;
  for (const int64_t i : kept) {
    kept_files.push_back(files[static_cast<std::size_t>(i)]);
    kept_labels.push_back(labels[static_cast<std::size_t>(i)]);
  }
  files = std::move(kept_files);
  labels = std::move(kept_labels);
  if (pixels.defined()) pixels = pixels.index_select(0, torch::tensor(kept, torch::kInt64)).contiguous();
  info.samples = static_cast<int64_t>(files.size());
  spdlog::warn("{}: {} of {} left out as unreadable (data.skip_bad_images); the run's summary counts them", kName,
               count_of(static_cast<int64_t>(info.skipped.size()), "image"), info.source);
}

// How the split's images are brought to its size, for the log line.
std::string fit_text(const ImageFit& fit) {
  if (fit.shorter_side > 0 && fit.center_crop) return " (resized, centre-cropped)";
  if (fit.shorter_side > 0) return " (resized)";
  if (fit.center_crop) return " (centre-cropped)";
  return fit.resize ? " (resized)" : "";
}

// A directory's identity (device and inode), so that a link back to a folder
// being listed is seen whatever path it is reached by.
std::pair<dev_t, ino_t> directory_identity(const fs::path& dir) {
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0) {
    throw DataError(fmt::format("{}: cannot list {}: {}", kName, dir.string(), std::strerror(errno)));
  }
  return {info.st_dev, info.st_ino};
}

}  // namespace

std::vector<int64_t> image_resize(const config::DataConfig& config) {
  const std::vector<int64_t>& size = config.image_size;
  if (size.empty() || (size.size() == 1 && size[0] == 0)) return {};
  return size.size() == 1 ? std::vector<int64_t>{size[0], size[0]} : size;
}

std::vector<fs::path> list_images(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code error;
  // The identities of `dir` (index 0) and of the folders the iterator is inside (depth d: index d + 1). Linked folders
  // are followed, but a link to one of these would be listed forever.
  std::vector<std::pair<dev_t, ino_t>> open_folders{directory_identity(dir)};
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, error), end;
       !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    std::error_code unknown;  // a dangling link: not a folder; named below when it is named as an image
    const bool folder = it->is_directory(unknown);
    if (!name.empty() && name[0] == '.') {
      if (folder) it.disable_recursion_pending();
      continue;
    }
    if (folder) {
      open_folders.resize(static_cast<std::size_t>(it.depth()) + 1);
      const auto identity = directory_identity(it->path());
      const auto loop = std::find(open_folders.begin(), open_folders.end(), identity);
      if (loop != open_folders.end()) {
        // Index k is the folder at depth k - 1: the entry's parent (index depth) is depth - k folders below it.
        const auto k = loop - open_folders.begin();
        fs::path ancestor = it->path().parent_path();
        for (auto up = it.depth() - k; up > 0; --up) ancestor = ancestor.parent_path();
        if (k == 0) ancestor = dir;
        throw DataError(
            fmt::format("{}: {} leads back to {}, a folder it is inside: a directory loop. Remove the "
                        "link, or point it outside {}",
                        kName, it->path().string(), ancestor.string(), dir.string()));
      }
      open_folders.push_back(identity);
      continue;
    }
    if (!is_image_file(it->path())) continue;
    // Only regular files are opened: reading a FIFO or a device named x.png would wait forever.
    if (const std::string problem = not_a_regular_file(it->path()); !problem.empty()) {
      throw DataError(fmt::format("{}: {}: {}; only regular image files can be read. Remove it from {}", kName,
                                  it->path().string(), problem, dir.string()));
    }
    files.push_back(it->path());
  }
  if (error) throw DataError(fmt::format("{}: cannot list {}: {}", kName, dir.string(), error.message()));
  std::sort(files.begin(), files.end());
  return files;
}

ImageFit image_fit(const config::DataConfig& config, Split split) {
  ImageFit fit;
  const bool cropped_at_random = split == Split::kTrain && config.augment.random_resized_crop.size > 0;
  if ((config.resize > 0 || !config.center_crop.empty()) && !cropped_at_random) {
    fit.shorter_side = config.resize;
    fit.center_crop = !config.center_crop.empty();
  } else {
    fit.resize = !image_resize(config).empty();
  }
  return fit;
}

torch::Tensor decode_images(const std::vector<fs::path>& files, const std::vector<int64_t>& shape, const ImageFit& fit,
                            int64_t max_pixels) {
  ConversionLog log(shape.at(0));
  return decode_all(files, {shape.at(0), shape.at(1), shape.at(2)}, fit, max_pixels, log);
}

std::shared_ptr<const Dataset> read_image_folder(const config::DataConfig& config, Split split,
                                                 const DatasetInfo* trained) {
  const bool train = split == Split::kTrain;
  if (config.root.empty()) {
    throw DataError(
        fmt::format("{}: data.root is empty: set it to the directory holding train/<class>/ and "
                    "test/<class>/ folders of images",
                    kName));
  }
  const fs::path train_dir = fs::path(config.root) / "train";
  const fs::path dir = train                      ? train_dir
                       : config.test_root.empty() ? fs::path(config.root) / "test"
                                                  : fs::path(config.test_root);
  std::error_code same_error;
  if (!train && fs::equivalent(dir, train_dir, same_error)) {
    spdlog::warn(
        "{}: data.test_root {} is the training folder, so the test pass measures the images the model trains on, "
        "not how it does on new ones; point it at held-out images",
        kName, dir.string());
  }
  // A test split without its training folder (a model tested after its
  // training images are gone) takes the classes and the size the model was trained on.
  std::error_code absent;
  const bool described = !train && trained != nullptr && !fs::exists(train_dir, absent);
  const std::string unknown_class = described
                                        ? "the model was not trained on"
                                        : fmt::format("the training split ({}) does not have", train_dir.string());
  const std::vector<ClassFolder> train_classes = described ? std::vector<ClassFolder>{} : class_folders(train_dir);
  std::vector<std::string> names = described ? trained->class_names : std::vector<std::string>{};
  for (const ClassFolder& folder : train_classes) names.push_back(folder.name);
  std::map<std::string, int64_t> index;
  for (const std::string& name : names) index.emplace(name, static_cast<int64_t>(index.size()));

  std::vector<fs::path> files;
  std::vector<int64_t> labels;
  for (const ClassFolder& folder : train ? train_classes : class_folders(dir)) {
    const auto known = index.find(folder.name);
    if (known == index.end()) {
      throw DataError(fmt::format("{}: {} is a class {}; its classes: {}", kName, folder.dir.string(), unknown_class,
                                  fmt::join(names, ", ")));
    }
    const std::vector<fs::path> images = list_images(folder.dir);
    if (images.empty()) throw no_images(folder.dir);
    files.insert(files.end(), images.begin(), images.end());
    labels.insert(labels.end(), images.size(), known->second);
  }
  // The first training image (under data.skip_bad_images the first whose header reads): data.channels and
  // data.image_size 0 follow it, or the model's images when its training folder is gone.
  fs::path reference("the model's training images");
  ImageShape stored;
  if (described) {
    stored = {trained->input_shape.at(0), trained->input_shape.at(1), trained->input_shape.at(2)};
  } else {
    const fs::path from = train ? train_dir : train_classes.front().dir;
    const std::vector<fs::path> firsts = train ? files : list_images(from);
    if (firsts.empty()) throw no_images(from);
    std::size_t first = 0;
    while (config.skip_bad_images && first < firsts.size() && !has_header(firsts[first], config.max_image_pixels)) {
      ++first;
    }
    if (first == firsts.size()) {  // all left out: said as leave_out_unreadable says it, not as the last one's error
      try {
        read_image_header(firsts.front(), config.max_image_pixels);
      } catch (const DataError& e) {
        throw DataError(
            fmt::format("{}: none of the {} in {} can be read (data.skip_bad_images left every one out); the first: {}",
                        kName, count_of(static_cast<int64_t>(firsts.size()), "image"), from.string(), e.what()));
      }
      first = 0;  // it reads now: it changed since it was tried
    }
    reference = firsts.at(first);
    stored = readable_header(reference, config.max_image_pixels);
  }
  const ImageFit fit = image_fit(config, split);
  // The split's size: the centre crop's, data.image_size's, or the first training image's (after data.resize).
  ImageShape shape{config.channels > 0 ? config.channels : stored.channels, 0, 0};
  if (fit.center_crop) {
    shape.height = config.center_crop.front();
    shape.width = config.center_crop.back();
  } else if (fit.resize) {
    const std::vector<int64_t> size = image_resize(config);
    shape.height = size[0];
    shape.width = size[1];
  } else {
    const auto [height, width] = fitted_size(stored, fit, shape);
    shape.height = height;
    shape.width = width;
  }

  DatasetInfo info;
  info.name = kName;
  info.source = dir.string();
  info.samples = static_cast<int64_t>(files.size());
  info.input_shape = {shape.channels, shape.height, shape.width};
  info.target_kind = TargetKind::kClasses;
  info.classes = static_cast<int64_t>(names.size());
  info.class_names = names;
  info.images = true;
  if (train) {
    spdlog::info("{}: {} in {}: {}", kName, count_of(info.classes, "class"), train_dir.string(),
                 numbered_classes(names));
  }

  const auto [memory, why] = choose_cache(config.cache, info.samples * shape.bytes());
  spdlog::info("data.cache: {} for the {} split's {} of {}x{}x{}{} ({})", memory ? "memory" : "none",
               train ? "training" : "test", count_of(info.samples, "image"), shape.channels, shape.height, shape.width,
               fit_text(fit), why);
  auto log = std::make_shared<ConversionLog>(shape.channels);
  torch::Tensor pixels;  // decoded at start: to keep (memory), or to find the unreadable images (skip_bad_images)
  if (memory || config.skip_bad_images) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> errors(files.size());
    pixels = decode_all(files, shape, fit, config.max_image_pixels, *log, memory,
                        config.skip_bad_images ? &errors : nullptr);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    spdlog::info("{}: decoded {} in {:.1f} s ({:.0f} images/s){}", kName, count_of(info.samples, "image"), seconds,
                 static_cast<double>(info.samples) / std::max(seconds, 1e-9),
                 memory ? "" : " to find the unreadable ones (data.skip_bad_images)");
    leave_out_unreadable(errors, files, labels, pixels, info);
  } else if (!fit.resize && !fit.center_crop) {
    require_one_size(files, reference, shape, fit, config.max_image_pixels);
  }
  auto dataset = std::make_shared<ImageFolderDataset>(std::move(info), files, torch::tensor(labels, torch::kInt64), fit,
                                                      config.max_image_pixels, std::move(log));
  if (memory) dataset->keep_in_memory(std::move(pixels));
  return dataset;
}

}  // namespace gputrain::data::detail

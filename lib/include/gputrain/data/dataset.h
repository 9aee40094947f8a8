#pragma once
// Data sets: raw samples kept in one contiguous block, described to the model
// builder by DatasetInfo. Implementations: cifar10, fashion_mnist, mnist,
// npy, csv, image_folder, random, synthetic (see make_dataset).
#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gputrain/config/config.h"

namespace gputrain::data {

enum class Split { kTrain, kTest };

enum class TargetKind {
  kClasses,  // int64 class labels, shape [N]
  kValues,   // float regression targets, shape [N, targets]
  kNone,     // unlabeled (the data-parallel demo's RandomDataset)
};

struct DatasetInfo {
  std::string name;                  // "cifar10", ...
  std::string source;                // directory or "generated", for messages
  int64_t samples = 0;               // in this split
  std::vector<int64_t> input_shape;  // per sample: {3, 32, 32}, {1, 28, 28} or {features}
  TargetKind target_kind = TargetKind::kClasses;
  int64_t classes = 0;                   // kClasses only
  std::vector<std::string> class_names;  // kClasses: index -> name (csv, folders, published); else empty
  int64_t targets = 0;                   // kValues only: values per sample
  bool images = false;                   // uint8 pixels (normalize/augment apply)
  std::vector<std::string> columns;      // csv: the training table's header, the target's column included
  // Files left out as unreadable (image_folder with data.skip_bad_images); not in `samples`.
  std::vector<std::string> skipped;
};

// Rows [top, top + height) and columns [left, left + width) of an image.
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// Picks a crop box in an image of `height` x `width` (data.augment.random_resized_crop's draw).
using DrawCropBox = std::function<CropBox(int64_t height, int64_t width)>;

// Storage of one split. Images stay uint8 ([N, C, H, W]); features float32 ([N, F]).
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual const DatasetInfo& info() const = 0;
  virtual const torch::Tensor& inputs() const = 0;   // the whole split, contiguous, CPU (if resident)
  virtual const torch::Tensor& targets() const = 0;  // undefined for TargetKind::kNone
  // Where sample `index` comes from, for error messages: the data set, the
  // file and the record in it where there is one.
  virtual std::string describe_sample(int64_t index) const;
  // Whether inputs() holds the split. Images decoded on demand (image_folder
  // under data.cache: none) leave it undefined: read_image gives each sample.
  virtual bool resident() const { return true; }
  // Sample `index`'s uint8 [C, H, W] pixels, written to `out`; a DataError
  // naming the sample when they cannot be read. Resident sets copy them from inputs().
  virtual void read_image(int64_t index, uint8_t* out) const;
  // Sample `index`'s pixels inside the box `draw_box` picks from the image's
  // size, resized to info().input_shape (torchvision's bilinear with
  // antialias), written to `out` as uint8 [C, H, W]. Resident sets draw on the
  // image as stored; image files under data.cache: none draw on the file's own
  // size and decode little more than the box.
  virtual void read_resized_crop(int64_t index, const DrawCropBox& draw_box, uint8_t* out) const;
  // The file sample `index` is read from per batch (image_folder under
  // data.cache: none), for a loader that reads and decodes it itself
  // (data.decode: gpu); null for a set that holds its samples.
  virtual const std::filesystem::path* sample_file(int64_t /*index*/) const { return nullptr; }
};

// Builds the dataset `config.dataset` for `split`, reading files under
// `config.root`. Generated sets (random, synthetic) derive their contents from
// `seed` (the test split differs from the train split). `trained` (a test
// split's): what a model was trained on, for a test split whose training split
// is gone (image_folder takes its classes and image size from it). Throws
// DataError naming the file and what is wrong.
std::shared_ptr<const Dataset> make_dataset(const config::DataConfig& config, Split split, uint64_t seed,
                                            const DatasetInfo* trained = nullptr);

// `config` for a caller that needs the samples' description (DatasetInfo),
// not their pixels: image_folder then decodes nothing up front (data.cache: none).
config::DataConfig for_description(config::DataConfig config);

}  // namespace gputrain::data

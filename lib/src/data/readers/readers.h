#pragma once
// The readers and generators behind make_dataset; each returns a TensorDataset.
#include <filesystem>
#include <string>
#include <vector>

#include "gputrain/data/tensor_dataset.h"
#include "images/image_files.h"

namespace gputrain::data::detail {

// More classes than this is a label that is not a class index (a value, an
// ID): the model's output layer would have a row for every number up to it.
inline constexpr int64_t kMaxClasses = 100000;

// DatasetInfo of a labelled image set (CIFAR-10, IDX) of shape `shape` per sample.
DatasetInfo image_info(const std::string& name, const std::string& source, int64_t samples, std::vector<int64_t> shape);

std::shared_ptr<const Dataset> read_cifar10(const std::string& root, Split split);
std::shared_ptr<const Dataset> read_idx(config::DatasetName dataset, const std::string& root, Split split);
// data.root: a directory of train_/test_ inputs/targets .npy files, or one .npz with those arrays.
std::shared_ptr<const Dataset> read_npy(const std::string& root, Split split);
// The samples of an npy array as the data sets hold them: uint8 [N, C, H, W]
// images (also from [N, H, W]), else float32 features ([N] becomes [N, 1]).
torch::Tensor as_samples(torch::Tensor inputs, bool& images);
// One .npy file as a tensor of its dtype and shape.
torch::Tensor read_npy_file(const std::string& file);
// data.root: a directory of train.csv and test.csv; `target_column` empty: the last column.
std::shared_ptr<const Dataset> read_csv(const std::string& root, const std::string& target_column, Split split);
// The features of `file`, a table with the training table's columns (DatasetInfo::columns),
// the target's column left out or kept (then ignored); float32 [N, F].
torch::Tensor read_csv_features(const std::string& file, const std::vector<std::string>& train_columns,
                                const std::string& target_column);
// data.root: train/<class>/*.png|jpg|jpeg and test/<class>/... (or data.test_root), decoded per data.image_size,
// data.channels and data.cache. The test split takes its classes and the size of data.image_size 0 from the
// training folder, or without one from `trained` when given (make_dataset's).
std::shared_ptr<const Dataset> read_image_folder(const config::DataConfig& config, Split split,
                                                 const DatasetInfo* trained);
// data.image_size as [height, width]; empty when the images keep their stored size ([] or [0]).
std::vector<int64_t> image_resize(const config::DataConfig& config);
// The image files under `dir` and its folders, sorted by path.
std::vector<std::filesystem::path> list_images(const std::filesystem::path& dir);
// How `split`'s images are brought to one size: data.resize and data.center_crop (the test split's, and the
// training split's without data.augment.random_resized_crop), else data.image_size.
ImageFit image_fit(const config::DataConfig& config, Split split);
// `files` decoded to [C, H, W] `shape`, brought to it by `fit` (else each must have it): uint8 [N, C, H, W],
// decoded on all hardware threads. An image stored with more than `max_pixels` (data.max_image_pixels) is
// refused before it is decoded.
torch::Tensor decode_images(const std::vector<std::filesystem::path>& files, const std::vector<int64_t>& shape,
                            const ImageFit& fit, int64_t max_pixels);
std::shared_ptr<const Dataset> make_random(const config::DataConfig& config, Split split, uint64_t seed);
std::shared_ptr<const Dataset> make_synthetic(const config::DataConfig& config, Split split, uint64_t seed);

// Throws a DataError unless `root` is a directory; `hint` says how to get the data.
void require_directory(const std::string& name, const std::string& root, const std::string& hint);

// Whether `file` exists as a regular file. Throws a DataError when that cannot
// be told (permission denied on data.root, say), which is no missing file.
bool is_data_file(const std::string& name, const std::filesystem::path& file);

}  // namespace gputrain::data::detail

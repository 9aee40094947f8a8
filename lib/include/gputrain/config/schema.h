#pragma once
// Every key of the experiment file, declared once: its name, its field, the
// values it accepts and what it means. The reader, the dumper, the key table
// in configs/README.md and the round-trip test are each one visitor over
// these declarations, so a new key is one line here (plus its field).
//
// A visitor V provides:
//   v.field(key, value, constraint, doc)  one key (constraint: Any, Min or Range)
//   v.section(key, sub)                   a nested mapping, visited with visit(v', sub)
//   v.check(key, ok, message)             a rule across keys: `key` is blamed when !ok
//   v.imply(key, value, implied, when)    a key left out takes `implied` when `when` holds
//   v.fixed_on_resume(key, when)          a resumed run keeps the checkpoint's value of `key`
//                                         (a section: every key in it), always or mid-epoch
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gputrain/common/strings.h"
#include "gputrain/config/config.h"

namespace gputrain::config {

// Any value of the field's type.
struct Any {};
// When a resumed run must keep a key's value: another value would not continue
// the same run (other weights or data), or, inside an epoch, not the same batch order.
enum class FixedOnResume { kAlways, kMidEpoch };
// An integer (or each integer of a list) of at least `min` and at most `max`.
struct Min {
  int64_t min;
  int64_t max = std::numeric_limits<int64_t>::max();
};
// The longest image side a size key takes: JPEG's largest, past any image a
// network trains on, and far from where sizes multiplied out for a batch of
// such images overflow (2147483648 did: "Storage size calculation overflowed").
inline constexpr int64_t kMaxImageSide = 65535;
constexpr Min image_side(int64_t min) { return {min, kMaxImageSide}; }
// The pixels each of data's size keys that is set asks of every image
// (image_size, resize's shorter side squared, center_crop,
// augment.random_resized_crop.size squared), by key (below data.).
std::vector<std::pair<std::string, int64_t>> pixels_asked(const DataConfig& c);
// A real number (or each of a list) in an interval; `max` infinite: no upper bound.
struct Range {
  double min;
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;
  bool max_open = true;
};
constexpr Range at_least(double min) { return {min}; }
constexpr Range above(double min) { return {min, std::numeric_limits<double>::infinity(), true}; }

// A visitor of the keys alone inherits this: the rules across keys do nothing.
struct KeysOnly {
  template <typename Message>
  void check(const std::string&, bool, const Message&) {}
  template <typename T>
  void imply(const char*, T&, const T&, bool) {}
  void fixed_on_resume(const char*, FixedOnResume) {}
};

// ">= 1", "> 0", "in [0, 1)", for errors and the key table.
std::string describe(const Min& constraint);
std::string describe(const Range& constraint);

// Rules the checks below need, kept out of this header's templates.
bool is_run_name(const std::string& name);
bool is_inside_run_dir(const std::string& dir);
// Threads beyond a few per hardware thread only compete for the cores, and a
// typo (100000) would spin creating them.
int64_t max_threads();
std::string too_many_threads(int64_t value);
// No value twice (data.keep_classes).
bool all_distinct(std::vector<int64_t> values);
// Below this a standard deviation scales [0, 1] pixels past any useful range
// (1e-300 makes the inputs, and so the loss, infinite).
inline constexpr double kMinNormalizeStd = 1e-6;
// The loader refuses fp16 with `device: cpu`; the trainer, with a device that resolved to the CPU.
inline constexpr const char* kFp16NeedsCuda = "fp16 autocast needs CUDA; on CPU use bf16 (train.amp: bf16)";

// A data key that only one kind of data set reads; `set`: it differs from its default.
struct DatasetOnlyKey {
  const char* key;  // below data.
  DatasetName reader;
  bool set;
};
// Every such key of `c`. With another data.dataset one is ignored, and the
// reader warns: not refused, since `--set data.dataset=npy` over a synthetic
// experiment (the set `gputrain datasets export` wrote) is a way of working.
std::vector<DatasetOnlyKey> dataset_only_keys(const DataConfig& c);

// Whether a resumed run must keep the checkpoint's value of `key` (dotted, as
// "data.batch_size"), by the schema's fixed_on_resume declarations; `mid_epoch`:
// the checkpoint was written inside an epoch.
bool is_fixed_on_resume(const std::string& key, bool mid_epoch);

template <class V>
void visit(V& v, NormalizeConfig& c) {
  v.field("mean", c.mean, Any{},
          "per-channel mean, after scaling pixels to [0, 1]; one value or one per channel; [] = no normalisation");
  v.field("std", c.std, above(0), "per-channel standard deviation, as many values as `mean`");
  v.check("std", c.mean.size() == c.std.size(),
          [&] { return fmt::format("needs as many values as mean ({} vs {})", c.std.size(), c.mean.size()); });
  v.check("std", std::all_of(c.std.begin(), c.std.end(), [](double s) { return s >= kMinNormalizeStd; }), [] {
    return fmt::format(
        "every value must be >= {}: dividing by less scales pixels in [0, 1] past any useful range "
        "(the loss becomes infinite)",
        kMinNormalizeStd);
  });
}

// A [low, high] pair of positive bounds, as torchvision's RandomResizedCrop takes scale and ratio.
inline bool is_bounds(const std::vector<double>& pair) { return pair.size() == 2 && pair[0] <= pair[1]; }

template <class V>
void visit(V& v, ResizedCropConfig& c) {
  v.field("size", c.size, image_side(0),
          "torchvision's `RandomResizedCrop(size, scale, ratio)` (training only): each image's box of a random share "
          "of the area (`scale`) and aspect ratio (`ratio`, drawn log-uniform), tried 10 times and else the centre "
          "crop, resized to `size` × `size` (bilinear, antialiased). The box is taken from the image as the data "
          "set stores it (after `data.image_size`), which must be `size` × `size` too, so that the model sees one "
          "shape; 0 = off. Replaces `data.resize` and `data.center_crop` on the training split");
  v.field("scale", c.scale, Range{0, 1, true, false}, "[low, high]: the box's share of the image's area");
  v.check("scale", is_bounds(c.scale), [] { return std::string("must be [low, high] with low <= high"); });
  v.field("ratio", c.ratio, above(0), "[low, high]: the box's width / height, drawn uniformly in log space");
  v.check("ratio", is_bounds(c.ratio), [] { return std::string("must be [low, high] with low <= high"); });
}

template <class V>
void visit(V& v, ColorJitterConfig& c) {
  v.field("brightness", c.brightness, at_least(0),
          "torchvision's `ColorJitter` (training only): pixels times a factor drawn uniformly from "
          "[max(0, 1 - b), 1 + b]; 0 = off");
  v.field("contrast", c.contrast, at_least(0),
          "blends each image with the mean of its grey version by a factor drawn as `brightness`'s; 0 = off");
  v.field("saturation", c.saturation, at_least(0),
          "blends each image with its grey version by a factor drawn as `brightness`'s; 0 = off");
  v.field("hue", c.hue, Range{0, 0.5, false, false},
          "shifts each image's hue by a fraction of the colour circle drawn uniformly from [-h, h]; 0 = off. The "
          "four ops run in an order drawn per image, as torchvision draws it (configs/README.md)");
}

template <class V>
void visit(V& v, AugmentConfig& c) {
  v.field("random_crop", c.random_crop, image_side(0),
          "zero padding in pixels, then a random crop back to size (training only); 0 = off");
  v.field("reflect", c.reflect, Any{},
          "`random_crop` pads with the image's edge mirrored (torchvision's `padding_mode=\"reflect\"`, airbench's "
          "translate) instead of zeros");
  v.check("reflect", !c.reflect || c.random_crop > 0,
          [] { return std::string("pads for data.augment.random_crop, which is 0; set it too"); });
  v.field("hflip", c.hflip, Any{}, "random horizontal flips (training only)");
  v.field("alternating_flip", c.alternating_flip, Any{},
          "with `hflip`: a random half of the images is mirrored in the first epoch, and every image is mirrored in "
          "every other epoch from then on (the airbench paper's alternating flip: each image is seen both ways "
          "within two epochs, which random flips leave to chance)");
  v.check("alternating_flip", !c.alternating_flip || c.hflip,
          [] { return std::string("is a way of flipping; set data.augment.hflip: true too"); });
  v.section("random_resized_crop", c.random_resized_crop);
  v.section("color_jitter", c.color_jitter);
}

template <class V>
void visit(V& v, DataConfig& c) {
  v.field("dataset", c.dataset, Any{},
          "`random` and `synthetic` are generated in memory; the others are read from `root`. `npy`: your own "
          "arrays, `train_inputs`, `train_targets`, `test_inputs`, `test_targets` (what `gputrain datasets export` "
          "writes): inputs float32/float64/integer of any sample shape (uint8 [C, H, W] or [H, W]: images), integer "
          "targets [N] = classes, float targets [N] or [N, T] = regression. `csv`: `train.csv` and `test.csv` with a "
          "header row, numeric feature columns and the target in `target_column`: integers or text labels = "
          "classes (labels numbered in sorted order and logged), other numbers = regression. `image_folder`: "
          "`root/train/<class>/*.png|jpg|jpeg` and `root/test/<class>/...` (or `test_root`); classes are the "
          "training folders in sorted order (logged with their indices); other files are skipped");
  v.fixed_on_resume("dataset", FixedOnResume::kAlways);
  v.field("root", c.root, Any{},
          "where the data set lives; empty: cifar10 `datasets/cifar-10-batches-bin`, fashion_mnist "
          "`/usr/share/datasets/fashion-mnist`, mnist `datasets/mnist`; npy: a directory of the four .npy files or "
          "one .npz holding them (required); csv: the directory of train.csv and test.csv (required); image_folder: "
          "the directory holding `train/` and `test/` (required)");
  v.field("target_column", c.target_column, Any{}, "`csv`: the name of the target's column; empty: the last column");
  v.field("test_root", c.test_root, Any{},
          "`image_folder`: the test split's directory of class folders; empty: `root/test`");
  v.field("image_size", c.image_size, image_side(0),
          "`image_folder`: every image resized (bilinear, antialiased) to `[height, width]`, or to a square of one "
          "size (`28`), as torchvision's `Resize`; `[]` or 0: kept as stored, which then must be one size "
          "throughout");
  v.check("image_size",
          c.image_size.size() <= 1 || (c.image_size.size() == 2 && c.image_size[0] > 0 && c.image_size[1] > 0),
          [] { return std::string("must be one size (a square) or [height, width], each >= 1"); });
  v.field("resize", c.resize, image_side(0),
          "`image_folder`: torchvision's `Resize(n)`: each image's shorter side scaled to n and the other in "
          "proportion (rounded down), bilinear and antialiased, before `center_crop`. It and `center_crop` apply to "
          "the test split and `predict`, and to the training split unless `augment.random_resized_crop` is set "
          "(whose boxes come from the images as `image_size` stores them); where they apply they replace "
          "`image_size`. 0 = off");
  v.field("center_crop", c.center_crop, image_side(1),
          "`image_folder`: torchvision's `CenterCrop`: `[size]` or `[height, width]` from the middle of each image "
          "(after `resize`), zero-padded where the image is smaller; the splits `resize` applies to; [] = off");
  v.check("center_crop", c.center_crop.size() <= 2,
          [] { return std::string("must be one size (a square) or [height, width]"); });
  v.field("skip_bad_images", c.skip_bad_images, Any{},
          "`image_folder`: an image that cannot be read or decoded (corrupt, empty, over `max_image_pixels`) is "
          "logged and left out of the split, and the run's summary counts it; false: such an image is an error "
          "naming it (exit 2). The images are all checked at start, as with `cache: memory`");
  v.field("channels", c.channels, Min{0},
          "`image_folder`: 1 (grey) or 3 (RGB), converted as decoded; 0: as the first training image (1 when grey, "
          "else 3)");
  v.check("channels", c.channels == 0 || c.channels == 1 || c.channels == 3,
          [] { return std::string("must be 1 (grey), 3 (RGB) or 0 (from the images)"); });
  v.field("max_image_pixels", c.max_image_pixels, Min{1},
          "`image_folder` and `predict`: an image whose header states more pixels (height × width) is refused "
          "before it is decoded, as PIL's `Image.MAX_IMAGE_PIXELS` does: a file of a few hundred bytes can claim "
          "65500 × 65500 pixels and take gigabytes to decode (a decompression bomb). Raise it for larger images");
  v.field("cache", c.cache, Any{},
          "`image_folder`: `memory` decodes every image once, at start (all threads), and keeps the uint8 pixels; "
          "`none` decodes each batch's images in the loader's worker threads, every epoch. `auto`: memory when "
          "the decoded split takes at most a quarter of the host's available memory, else none; logged at start");
  v.field("decode", c.decode, Any{},
          "`image_folder` under `cache: none`: where each batch's JPEGs are decoded. `cpu`: in the loader's "
          "worker threads (libjpeg-turbo); `gpu`: by nvJPEG on the training GPU, the workers only reading the "
          "files and drawing the augmentation (same samples, order and draws as `cpu`; pixels within JPEG "
          "decoders' rounding). `auto`: gpu when the run is on CUDA, the data set is `image_folder` under "
          "`cache: none` with JPEG files only, `augment.reflect` is off (its crops pad with zeros) and nvJPEG "
          "loads (the `nvidia-nvjpeg` wheel, scripts/setup.sh), else cpu; logged at "
          "run start and shown by `gputrain plan`. `gpu` where it cannot run is an error saying why");
  v.field("batch_size", c.batch_size, Min{1},
          "global batch per optimizer step, shared by accumulation, replicas and ranks (above). `auto`: with "
          "`micro_batch_size`, that × `train.accumulation_steps` × processes; without it, `train.target_batch`, as "
          "the largest micro-batch whose training step fits in memory (one real step measured per try; "
          "`train.max_memory`) times the fewest accumulation steps that make it; logged at run start, shown by "
          "`gputrain plan`, and kept by checkpoints (a resumed run does not measure again)");
  v.fixed_on_resume("batch_size", FixedOnResume::kMidEpoch);
  v.field("micro_batch_size", c.micro_batch_size, Min{1},
          "the batch stated the tutorials' way: samples per forward pass in each process. `batch_size` is then "
          "`micro_batch_size` × `train.accumulation_steps` × processes (ranks; 1 without a launcher). Set one of "
          "the two, or both when they agree; `auto`: `batch_size` / `train.accumulation_steps` (above)");
  // Given alone, the micro-batch states the batch: batch_size is then worked out for the processes.
  v.imply("batch_size", c.batch_size, std::optional<int64_t>{}, c.micro_batch_size.has_value());
  v.field("test_batch_size", c.test_batch_size, Min{0}, "evaluation batch; 0 = `batch_size`");
  v.field("num_workers", c.num_workers, Min{0},
          "loader threads; 0 = the training thread. The sample order never depends on it. At most 4 per hardware "
          "thread (16 at least)");
  v.check("num_workers", c.num_workers <= max_threads(), [&] { return too_many_threads(c.num_workers); });
  v.field("prefetch", c.prefetch, Min{0}, "batches queued ahead; 0 = 2 × workers");
  v.field("decode_threads", c.decode_threads, Min{0},
          "threads that decode and augment images one at a time (files under `cache: none`, "
          "`augment.random_resized_crop`, `augment.color_jitter`), shared by the `num_workers` that assemble "
          "batches, so every core decodes however many batches are under way. 0 = auto: the CPUs this process may "
          "use (its affinity mask and cgroup quota). Logged at run start");
  v.check("decode_threads", c.decode_threads <= max_threads(), [&] { return too_many_threads(c.decode_threads); });
  v.field("pin_memory", c.pin_memory, Any{},
          "page-locked batches and non-blocking copies (ignored, with one warning, without CUDA)");
  v.field("shuffle", c.shuffle, Any{}, "a seeded permutation of the training split per epoch");
  v.fixed_on_resume("shuffle", FixedOnResume::kMidEpoch);
  v.field("drop_last", c.drop_last, Any{}, "drop the training split's last short batch");
  v.fixed_on_resume("drop_last", FixedOnResume::kMidEpoch);
  v.field("device_cache", c.device_cache, Any{},
          "keep the whole data set on the training device (images as uint8) and make each batch there: gather, "
          "crop, flip and normalise are tensor ops on the device, and no host loader runs in the loop "
          "(`num_workers`, `prefetch` and `pin_memory` then do nothing). Same samples, order and augmentation as "
          "the loader; costs device memory (150 MB for CIFAR-10's training set, 47 MB for Fashion-MNIST's). "
          "`auto`: on CUDA when the split takes at most half of the GPU's free memory (the rest is for the model, "
          "its optimizer state and activations), else the host loader; on the CPU on, since the data set is in "
          "memory already and batched tensor ops beat per-sample loader threads there. Logged at run start. `true` "
          "with a split that does not fit is an error saying so");
  v.section("normalize", c.normalize);
  v.section("augment", c.augment);
  // An image brought to a size is held to the bound its file is: the memory is the same.
  for (const auto& [key, pixels] : pixels_asked(c)) {
    v.check(key, pixels <= c.max_image_pixels, [&, pixels = pixels] {
      return fmt::format(
          "asks {} pixels of every image, more than data.max_image_pixels ({}); choose a smaller size, or raise "
          "data.max_image_pixels if images this large are meant",
          pixels, c.max_image_pixels);
    });
  }
  v.check("image_size",
          c.image_size.empty() || (c.resize == 0 && c.center_crop.empty()) || c.augment.random_resized_crop.size > 0,
          [] {
            return std::string(
                "would not be used: `resize` and `center_crop` replace it on both splits unless "
                "`augment.random_resized_crop` is set (then it sizes the training images); remove one");
          });
  v.field("length", c.length, Min{1}, "`random`: samples (unlabeled, as the data-parallel tutorial's RandomDataset)");
  v.fixed_on_resume("length", FixedOnResume::kAlways);
  v.field("input_size", c.input_size, Min{1}, "`random`: features per sample");
  v.fixed_on_resume("input_size", FixedOnResume::kAlways);
  v.field("samples", c.samples, Min{1}, "`synthetic`: training samples (seeded standard-normal inputs)");
  v.fixed_on_resume("samples", FixedOnResume::kAlways);
  v.field("test_samples", c.test_samples, Min{0}, "`synthetic`: test samples");
  v.fixed_on_resume("test_samples", FixedOnResume::kAlways);
  v.field("features", c.features, Min{1}, "`synthetic`: features per sample");
  v.fixed_on_resume("features", FixedOnResume::kAlways);
  v.field("classes", c.classes, Min{2}, "`synthetic`: classes of the random labels");
  v.fixed_on_resume("classes", FixedOnResume::kAlways);
  v.field("targets", c.targets, Min{0},
          "`synthetic`: > 0 makes it a regression task with that many real-valued targets");
  v.fixed_on_resume("targets", FixedOnResume::kAlways);
  v.field("keep_classes", c.keep_classes, Min{0},
          "only the samples of these classes, in both splits, relabelled 0, 1, ... in the order listed (so the "
          "model's head has that many outputs), with their names where the data set has them; `[]`: every class. "
          "The first stage of configs/fashion_mnist_finetune.yaml trains on `[0, 1, 2, 3, 4]`");
  v.check("keep_classes", all_distinct(c.keep_classes),
          [] { return std::string("names a class twice; list each class once"); });
  v.fixed_on_resume("keep_classes", FixedOnResume::kAlways);
}

template <class V>
void visit(V& v, ModelConfig& c) {
  v.field("name", c.name, Any{},
          "`linear`, the MLP, the LeNet-style Net of PyTorch's CIFAR-10 tutorial, or `layers`: the network "
          "`model.layers` declares "
          "(implied when `model.layers` is given and this key is left out)");
  v.field("layers", c.layers, Any{},
          "the network as a list of layers (makes `model.name` `layers`), each `{type: conv2d, out_channels: 64, "
          "kernel: 3}` or "
          "a type's word (`relu`); input sizes follow the data set. Types and their keys: the table below");
  v.imply("name", c.name, ModelName::kLayers, !c.layers.empty());
  v.check("layers", (c.name == ModelName::kLayers) == !c.layers.empty(), [&] {
    return c.layers.empty() ? std::string("is empty, but model.name is `layers`: declare the network here")
                            : fmt::format(
                                  "declares a network, but model.name is `{}`; leave model.name out (model.layers "
                                  "implies `layers`) or remove model.layers to use `{}`",
                                  word(c.name), word(c.name));
  });
  v.field("in_features", c.in_features, Min{1}, "input size; `auto`: from the data set");
  v.field("out_features", c.out_features, Min{1}, "output size; `auto`: the data set's classes or targets");
  v.field("hidden", c.hidden, Min{1}, "MLP hidden widths");
  v.field("activation", c.activation, Any{}, "the MLP's activation");
  v.field("dropout", c.dropout, Range{0, 1}, "dropout after each hidden layer of the MLP");
  v.field("sync_batchnorm", c.sync_batchnorm, Any{},
          "under ddp, each batchnorm layer normalises with the statistics of the global batch (the ranks' count, "
          "mean and squared deviations combined by Chan's parallel variance in float64: two small all-reduces per "
          "layer in the forward pass and one in the backward, as PyTorch's SyncBatchNorm) instead of its own "
          "rows', so N ranks train as one process on the whole batch. Off: each "
          "rank's batchnorm sees its rows only. One process: nothing to share. dp refuses it (its replicas are "
          "threads: run ddp with --nproc instead)");
  v.field("init_from", c.init_from, Any{},
          "start from these weights instead of the layers' random initialisation: a gputrain checkpoint (its "
          "evaluated weights: the train.ema average when it has one), a model.pt, a state dict written by `gputrain "
          "export` or by PyTorch's `torch.save(model.state_dict(), path)`, or a .safetensors file, told apart by "
          "content. Tensors are matched by name and shape; those that do not fit (a new head for another class "
          "count, a layer the file lacks) keep their initialisation and are listed at run start and by `gputrain "
          "plan`. A file none of whose tensors fits is refused. A resumed run reads the file again (it must still be "
          "there), then restores the checkpoint's weights over it");
  v.field("init_strict", c.init_strict, Any{},
          "`model.init_from` must supply every tensor of the model, in its shape, and hold no other: any tensor "
          "that does not fit is an error naming it, instead of being skipped");
  v.check("init_strict", !c.init_strict || !c.init_from.empty(),
          [] { return std::string("checks model.init_from, which is empty; set it too, or leave this out"); });
  v.field("init_map", c.init_map, Any{},
          "renames `model.init_from`'s tensors before they are matched, for files whose names are another "
          "library's: each rule `from=to` replaces the prefix `from` of a name with `to` (the first rule that "
          "matches; `head.=heads.head.` reads timm's ViT head as torchvision's, `model.=` drops a prefix). What "
          "was renamed is listed at run start and by `gputrain plan`. Without rules, a file whose names differ "
          "but whose tensors line up with the model's one for one (the same network under older layer names) is "
          "read by position, each rename logged");
  v.check("init_map", c.init_map.empty() || !c.init_from.empty(), [] {
    return std::string("renames model.init_from's tensors, which is empty; set it too, or leave this out");
  });
  v.field("freeze", c.freeze, Any{},
          "parameter name prefixes that do not train (`[conv1, res1]`, the names `gputrain model` lists): their "
          "parameters keep their values, get no gradients, and are left out of the optimizer and of ddp's "
          "gradient all-reduce. A prefix that matches no parameter is an error listing the model's top-level "
          "names. Logged at run start, with the counts, and shown by `gputrain plan`");
  v.field("freeze_epochs", c.freeze_epochs, Min{0},
          "> 0: model.freeze holds for the first this many epochs only (a fine-tune's new head trains alone "
          "first), and from then on the frozen parameters train too, at the schedule's lr × "
          "`unfreeze_lr_multiplier`. Their gradients are computed throughout (in the frozen epochs their lr is 0, "
          "so neither the step nor weight decay moves them), and their batchnorm layers normalise with each "
          "batch (`freeze_batchnorm` applies to a freeze for the whole run). 0: frozen for the whole run");
  v.check("freeze_epochs", c.freeze_epochs == 0 || !c.freeze.empty(),
          [] { return std::string("bounds model.freeze, which is empty; set it too, or leave this out"); });
  v.field("unfreeze_lr_multiplier", c.unfreeze_lr_multiplier, above(0),
          "after `freeze_epochs`: the lr of the parameters model.freeze held is the schedule's × this (a lower "
          "rate for a pretrained body: 0.1)");
  v.check("unfreeze_lr_multiplier", c.unfreeze_lr_multiplier == 1 || c.freeze_epochs > 0,
          [] { return std::string("applies after model.freeze_epochs, which is 0; set it too, or leave this out"); });
  v.field("freeze_batchnorm", c.freeze_batchnorm, Any{},
          "a batchnorm layer whose parameters are all frozen (model.freeze): `eval` keeps it in eval mode while "
          "training, normalising with its running statistics and not updating them (the weights' statistics stay "
          "those the file was trained with, as torchvision's fine-tuning recipes keep them); `train` lets it "
          "normalise with each batch's statistics and update the running ones. Logged at run start");
}

template <class V>
void visit(V& v, MuonConfig& c) {
  v.field("lr", c.lr, at_least(0),
          "Muon for every trained 4-D convolution weight (airbench94_muon's optimizer), the other parameters "
          "following `optim.name` (sgd, adam or adamw): each step, the weight's momentum (`momentum`, `nesterov`, "
          "no weight decay) reshaped to [out_channels, rest] is orthogonalised by `steps` Newton–Schulz iterations "
          "(the quintic "
          "3.4445, −4.7750, 2.0315, in float32 on the weight's device), the weight is rescaled to Frobenius norm "
          "sqrt(out_channels), then moved by lr × that matrix. This lr follows the schedule as `optim.lr` does; 0 = "
          "off. With sgd the other parameters take PyTorch's fused SGD step whatever `fused` and `foreach` say, and "
          "the state is SGD's (a momentum buffer per parameter); with adam or adamw they take PyTorch's fused "
          "Adam/AdamW step (the foreach step with `foreach`), and the state is Adam's (Muon's buffer held as "
          "exp_avg). Either is saved and resumed as such, and runs in `train.cuda_graph`. Logged at run start with "
          "the parameter groups");
  v.field("momentum", c.momentum, Range{0, 1}, "Muon's momentum (airbench: 0.6)");
  v.field("nesterov", c.nesterov, Any{}, "Muon with Nesterov momentum");
  v.check("nesterov", !c.nesterov || c.momentum > 0 || c.lr == 0,
          [] { return std::string("needs optim.muon.momentum > 0"); });
  // The iteration converges in a handful (Muon's reference uses 5); a typo (1000000) would stall every step.
  v.field("steps", c.steps, Min{1, 100}, "Newton–Schulz iterations per step (airbench: 3)");
}

template <class V>
void visit(V& v, LookaheadConfig& c) {
  v.field("k", c.k, Min{0},
          "Lookahead (Zhang et al. 2019) around the optimizer, whichever it is (with `muon` too): slow weights, "
          "begun as a copy of the trained parameters, and after every `k`-th optimizer step of the run (counted "
          "from its first, skipped steps included) `slow += alpha × (weights − slow)`, then the weights take the "
          "slow values; the optimizer's state is left as it is. Run as two multi-tensor ops outside the step, so "
          "the fused step and `train.cuda_graph` stay on. Checkpoints keep the slow weights, so a resumed run is "
          "exact. 0 = off; the paper uses 5 (and airbench94 syncs every 5 steps too)");
  v.field("alpha", c.alpha, Range{0, 1, true, false},
          "the share of the way the slow weights move toward the weights at each sync (the paper: 0.5); 1 moves them "
          "all the way, "
          "which is plain training");
}

template <class V>
void visit(V& v, OptimConfig& c) {
  v.field("name", c.name, Any{}, "the optimizer");
  v.fixed_on_resume("name", FixedOnResume::kAlways);
  v.field("lr", c.lr, above(0), "learning rate (the schedule's peak)");
  v.field("momentum", c.momentum, Range{0, 1}, "SGD momentum");
  v.field("weight_decay", c.weight_decay, at_least(0), "L2 penalty (decoupled for adamw)");
  v.field("no_decay_bias_norm", c.no_decay_bias_norm, Any{},
          "no weight decay on every parameter of at most one dimension: the biases, and the weights and biases of "
          "normalisation layers (BatchNorm, LayerNorm, GroupNorm), as timm's and nanoGPT's parameter groups do; "
          "the others keep `weight_decay`. Logged at run start");
  v.field("bias_lr_multiplier", c.bias_lr_multiplier, above(0),
          "the learning rate of every parameter whose name ends in `bias` (normalisation weights excluded) is the "
          "schedule's × this, as airbench scales its biases'; the logged lr stays the schedule's. Logged at run start");
  v.field("nesterov", c.nesterov, Any{}, "SGD with Nesterov momentum");
  v.check("nesterov", !c.nesterov || c.momentum > 0, [] { return std::string("needs optim.momentum > 0"); });
  v.field("betas", c.betas, Range{0, 1}, "Adam and AdamW: [beta1, beta2]");
  v.check("betas", c.betas.size() == 2,
          [&] { return fmt::format("needs two values [beta1, beta2] (got {})", c.betas.size()); });
  v.field("eps", c.eps, above(0), "Adam and AdamW: added to the denominator");
  v.field("scheduler", c.scheduler, Any{},
          "`step` (× `gamma` every `step_size` epochs), `cosine` or `onecycle` over the run's steps, "
          "`linear_warmup_decay` (up over `warmup_fraction`, flat, down to 0 over `cooldown_fraction`), or `none`");
  v.field("step_size", c.step_size, Min{1}, "`step`: epochs between decays");
  v.field("gamma", c.gamma, Range{0, 1, true, false}, "`step`: decay factor");
  v.field("warmup_steps", c.warmup_steps, Min{0},
          "linear warm-up in optimizer steps before the schedule (not with `linear_warmup_decay`, which has its own)");
  v.check("warmup_steps", c.warmup_steps == 0 || c.scheduler != SchedulerName::kLinearWarmupDecay, [] {
    return std::string(
        "linear_warmup_decay warms up by itself over optim.warmup_fraction; set that instead of warmup_steps");
  });
  v.field("warmup_fraction", c.warmup_fraction, Range{0, 1, false, false},
          "`linear_warmup_decay`: the share of the run's optimizer steps over which the lr rises linearly to `lr`, "
          "from `lr` / (fraction × steps) at the first step");
  v.field("cooldown_fraction", c.cooldown_fraction, Range{0, 1, false, false},
          "`linear_warmup_decay`: the share of the run's optimizer steps at its end over which the lr falls "
          "linearly to 0 at the end of the run. The two fractions sum to at most 1: 1 makes a triangle, both 0 a "
          "constant lr");
  const bool trapezoid = c.scheduler == SchedulerName::kLinearWarmupDecay;
  const auto ignored = [&] {
    return fmt::format("only applies to optim.scheduler: linear_warmup_decay (the scheduler is {})", word(c.scheduler));
  };
  v.check("warmup_fraction", trapezoid || c.warmup_fraction == 0, ignored);
  v.check("cooldown_fraction", trapezoid || c.cooldown_fraction == 0, ignored);
  v.check("cooldown_fraction", c.warmup_fraction + c.cooldown_fraction <= 1, [&] {
    return fmt::format("optim.warmup_fraction + optim.cooldown_fraction must be <= 1 (got {} + {})", c.warmup_fraction,
                       c.cooldown_fraction);
  });
  v.field("foreach", c.foreach, Any{},
          "as PyTorch's `foreach=`: the step runs as a few `_foreach_*` multi-tensor kernels over all parameters "
          "instead of a loop of small ops per parameter. Same update up to rounding, same state in checkpoints. On "
          "CUDA the step runs so whenever `fused` is off, as PyTorch's optimizers default to there");
  v.field("fused", c.fused, Any{},
          "as PyTorch's `fused=`: one `_fused_sgd_`/`_fused_adam_`/`_fused_adamw_` kernel per step, on the CPU and "
          "on CUDA. At most one of `foreach` and `fused`. `auto`: on (every optimizer here has the kernel on both), "
          "off when `foreach` is set");
  v.check("fused", !(c.foreach && c.fused == Switch::kOn),
          [] { return std::string("optim.foreach and optim.fused are alternatives; set at most one"); });
  v.section("muon", c.muon);
  v.fixed_on_resume("muon", FixedOnResume::kAlways);
  v.section("lookahead", c.lookahead);
}

template <class V>
void visit(V& v, EarlyStoppingConfig& c) {
  v.field("patience", c.patience, Min{0},
          "stop after this many evaluations in a row without an improvement of the metric by more than "
          "`min_delta`; 0 = off");
  v.field("min_delta", c.min_delta, at_least(0),
          "the smallest change that counts as an improvement (accuracy as a fraction, or loss)");
  v.field("metric", c.metric, Any{},
          "`accuracy` (classification) or `loss`, both of the test split; `auto`: accuracy for classification, "
          "loss otherwise");
  v.field("restore_best", c.restore_best, Any{},
          "when training ends, stopped early or not, the model (and `model.pt`) gets the weights that scored best "
          "(the averaged ones under `train.ema`)");
}

template <class V>
void visit(V& v, EmaConfig& c) {
  v.field("decay", c.decay, Range{0, 1},
          "keep an exponential moving average of the weights and buffers, `average = decay × average + (1 − decay) "
          "× weights` (PyTorch's `AveragedModel` with `get_ema_multi_avg_fn(decay)` and `use_buffers=True`), "
          "begun as a copy of the weights at its first update. Every evaluation, `model.pt` and `best.ckpt` use "
          "it; checkpoints keep it, so a resumed run is exact. 0 = off; 0.99 to 0.9999 is usual");
  v.field("start_epoch", c.start_epoch, Min{1},
          "the first epoch whose steps update the average; evaluations before it use the weights themselves");
  v.field("every", c.every, Min{1}, "optimizer steps between updates (counted from the run's first step)");
}

template <class V>
void visit(V& v, TtaConfig& c) {
  v.field("hflip", c.hflip, Any{}, "evaluation also sees each image mirrored left to right; the logits are averaged");
  v.field("translate", c.translate, Min{0},
          "evaluation also sees each image shifted by this many pixels up, down, left and right (the border "
          "reflected, as airbench's); the logits of all views (with `hflip`, of each of them mirrored too) are "
          "averaged. 0 = off; images only");
}

template <class V>
void visit(V& v, ProfileConfig& c) {
  v.field("epoch", c.epoch, Min{0},
          "record this epoch's first `steps` optimizer steps with LibTorch's profiler (Kineto; CUDA kernels too on a "
          "GPU) on rank 0: a Chrome/Perfetto trace `profile_trace.json` in the run directory (chrome://tracing, "
          "ui.perfetto.dev) and the top operators by self time in the log and report.html; 0 = off. Epoch 1's first "
          "steps include one-time costs (allocations, kernel selection): 2 shows the steady state");
  v.field("steps", c.steps, Min{1}, "how many optimizer steps the profile records (fewer when the epoch has fewer)");
}

template <class V>
void visit(V& v, TrainConfig& c) {
  v.field("epochs", c.epochs, Min{1}, "passes over the training split");
  v.field("loss", c.loss, Any{}, "`auto`: `cross_entropy` for class labels, `mse` for regression targets");
  v.field("amp", c.amp, Any{}, "mixed precision: `fp16` (CUDA, with a gradient scaler) or `bf16` autocast; `off`");
  v.field("accumulation_steps", c.accumulation_steps, Min{1},
          "micro-batches per optimizer step (above); chosen by `data.batch_size: auto`");
  v.fixed_on_resume("accumulation_steps", FixedOnResume::kMidEpoch);
  v.field("target_batch", c.target_batch, Min{0},
          "with `data.batch_size: auto`: the global batch per optimizer step (all processes) to reach; 0 = none");
  v.field("max_memory", c.max_memory, Any{},
          "with `data.batch_size: auto`: the memory one process's training step may take (weights, gradients, "
          "optimizer state, activations), as bytes: `2GiB`, `512MiB`, `1.5GB`. `auto`: half of the host's "
          "available memory shared by the processes on it (CPU); on CUDA the GPU's free memory, a step that runs out "
          "of memory backing off to the next smaller micro-batch");
  v.field("grad_clip", c.grad_clip, at_least(0),
          "maximum global L2 norm of the gradients, clipped on the device (no host read, so `cuda_graph` captures it); "
          "0 = off");
  v.field("log_every", c.log_every, Min{1}, "optimizer steps between log lines and metrics.jsonl records");
  v.field("log_replicas", c.log_replicas, Any{},
          "dp: each replica logs its input and output sizes, as PyTorch's DataParallel tutorial shows; ddp: rank 0 "
          "logs every "
          "rank's share of each batch (`ddp: batch of 8 over 2 ranks: rank 0 rows [0,4) n=4; rank 1 rows [4,8) n=4`)");
  v.field("class_weights", c.class_weights, above(0),
          "one positive weight per class for the cross-entropy (`[1, 3]`: class 1's errors count three times class "
          "0's), as PyTorch's "
          "`CrossEntropyLoss(weight=...)`: the batch's loss is the weighted mean, divided by the sum of its "
          "samples' weights. As many as the data set has "
          "classes; [] = all 1");
  v.field("label_smoothing", c.label_smoothing, Range{0, 1},
          "cross-entropy with label smoothing ε, as PyTorch's `CrossEntropyLoss(label_smoothing=ε)`: each "
          "sample's target is 1 − ε on its class plus ε / classes on every class; 0 = off. The training loss only: "
          "the test loss stays the plain cross-entropy, so runs with and without it compare. Classification only");
  v.field("eval_every", c.eval_every, Min{1},
          "epochs between evaluations of the test split; the last epoch is always evaluated");
  v.field("eval_every_steps", c.eval_every_steps, Min{0},
          "also evaluate every N optimizer steps (for `target_accuracy` and `early_stopping` within an epoch); 0 = "
          "off");
  v.field("target_accuracy", c.target_accuracy, Range{0, 1, false, false},
          "stop as soon as an evaluation reaches this test accuracy (a fraction: 0.93 for 93%); the summary line, "
          "run.json and the report give `time_to_target_s` (training time, evaluations left out) and "
          "`time_to_target_wall_s`, and the result line `time_to_target_process_s` (from the process's start: "
          "loading LibTorch, CUDA's start and the data counted). 0 = off; classification only");
  v.section("early_stopping", c.early_stopping);
  v.section("ema", c.ema);
  v.section("tta", c.tta);
  v.field("on_nan", c.on_nan, Any{},
          "a non-finite loss: `stop` (exit 1, naming the steps and the last checkpoint) or `skip` the batch (not with "
          "fp16, whose scaler skips such steps). Checked on the device without a sync: `stop` comes at the next log "
          "interval, epoch end, checkpoint or evaluation (see Non-finite losses)");
  v.field("on_sigint", c.on_sigint, Any{},
          "what SIGINT/SIGTERM do: finish the step, then `checkpoint` and exit 130, `stop` (exit 130 without one), "
          "`none` (the signal's default action)");
  v.field("resume", c.resume, Any{},
          "where a run starts when `train --resume` is not given: `auto` continues from the newest intact checkpoint "
          "of this run when the process is a restart (torchrun's `TORCHELASTIC_RESTART_COUNT` > 0 under "
          "`--max-restarts`, also `train --nproc N --max-restarts K`; a requeued Slurm job's `SLURM_RESTART_COUNT` > "
          "0) and starts afresh otherwise; `never` always starts afresh; a checkpoint file's path continues from it. "
          "The choice and its reason are logged at run start");
  v.field("cuda_graph", c.cuda_graph, Any{},
          "capture the whole train step (zero the gradients, forward, loss, backward, update) as a CUDA graph after 3 "
          "eager warm-up steps and replay it: one launch per step; an epoch's last step, when its micro-batches are "
          "fewer or shorter, runs eagerly. Needs CUDA and one device per process: `strategy: single`, or `ddp` over "
          "NCCL, whose gradient all-reduce is captured with the step (not `dp`, nor ddp over gloo); otherwise the run "
          "logs why and steps eagerly. The fused or foreach update reads its learning rate from the device. "
          "Accumulation (the step's micro-batches in one replay), `amp` (bf16, and fp16 with its "
          "loss scaler on the device: skipped steps show at the next log interval), clipping and class weights are "
          "captured with the step. `auto`: on wherever those hold");
  v.field("channels_last", c.channels_last, Any{},
          "model weights and 4-D inputs in channels-last memory format (what cuDNN's tensor-core convolutions and "
          "oneDNN prefer); inputs are reordered on the device. `auto`: on the CPU for convolutions on images of 3 or "
          "more channels, or on fewer when the convolution reading them is under 10% of the forward pass (a "
          "single-channel one measured slow channels-last); on CUDA under `amp` for a model whose "
          "convolutions after the first have channel counts that are multiples of 8 (tensor cores), else off (the "
          "CIFAR-10 tutorial Net's 6- and 16-channel layers measured slower on an H100)");
  v.field("cudnn_benchmark", c.cudnn_benchmark, Any{},
          "cuDNN times its convolution algorithms for each new training input shape and keeps the fastest (no "
          "effect off CUDA); evaluation and test-time views never search, they use cuDNN's heuristics. `auto`: on "
          "CUDA for a model whose micro-batch forward pass is at least 50 G multiply-adds; below that the search "
          "costs the first epoch more than it saves");
  v.field("threads", c.threads, Min{0},
          "threads each CPU op may use (LibTorch's intra-op pool); 0 = LibTorch's default, one per physical core. "
          "On a machine shared with other work, or for a model too small to split, 1 is often much faster: a thread "
          "descheduled mid-op stalls the others at the end of every parallel region. `auto`: on the CPU, 1 when one "
          "micro-batch's forward pass takes under 1 M multiply-adds, else one per usable CPU that other work leaves "
          "free, at most LibTorch's default (usable: the process's CPU affinity capped by its cgroup quota; other "
          "work: the larger of the CPUs other processes kept busy while this one started up, at least 50 ms, and the "
          "runnable threads; logged). At most 4 per hardware thread (16 at least)");
  v.check("threads", c.threads.value_or(0) <= max_threads(), [&] { return too_many_threads(c.threads.value_or(0)); });
  v.field("matmul_precision", c.matmul_precision, Any{},
          "float32 matrix products: `highest` (full float32), `high` (TF32 on CUDA: 10-bit mantissa inputs, float32 "
          "sums, several times faster on tensor cores), `medium` (bfloat16 inputs). `auto`: `high` on CUDA, where "
          "cuDNN's convolutions already use TF32 by default, `highest` elsewhere; logged at run start");
  v.field("tensorboard", c.tensorboard, Any{},
          "write TensorBoard event files into the run directory (`tensorboard --logdir runs`); a fresh run moves an "
          "earlier run's event files to `events.N/`, a run of its own in TensorBoard");
  v.field("monitor_ms", c.monitor_ms, Min{0},
          "on CUDA, sample each GPU's utilization, memory, power and temperature through NVML this often; 0 = off");
  // Below 10 ms the sampling itself would cost more than it tells.
  v.check("monitor_ms", c.monitor_ms == 0 || c.monitor_ms >= 10,
          [&] { return fmt::format("must be 0 (off) or >= 10 (got {})", c.monitor_ms); });
  v.section("profile", c.profile);
}

template <class V>
void visit(V& v, DpConfig& c) {
  v.field("replicas", c.replicas, Min{0}, "dp on the CPU: replica threads; 0 = one per selected GPU on CUDA");
}

template <class V>
void visit(V& v, DdpConfig& c) {
  v.field("backend", c.backend, Any{},
          "`auto`: `nccl` on CUDA, `gloo` on the CPU; `gloo` also runs on CUDA; `nccl` on the CPU is an error");
  v.field("timeout_s", c.timeout_s, Min{1},
          "seconds the rendezvous and each collective may take before every rank stops with an error naming the "
          "missing rank. Under NCCL, gputrain's own wait (once per optimizer step, on the step's flags) ends at this "
          "timeout; NCCL's watchdog, which kills the process, is given half of it again (30 s to 5 min) as a last "
          "resort");
  v.field("bucket_cap_mb", c.bucket_cap_mb, above(0),
          "as PyTorch DDP's `bucket_cap_mb`: gradients are all-reduced in buckets of about this many MiB, each "
          "launched during backward as soon as its gradients are ready (c10d's Reducer), so communication overlaps "
          "the rest of backward. At the default 25 the first bucket (the last layers' gradients, ready first) holds "
          "1 MiB, as PyTorch's");
  v.field("gradient_as_bucket_view", c.gradient_as_bucket_view, Any{},
          "as PyTorch DDP's `gradient_as_bucket_view`: the parameters' gradients are views into the all-reduce "
          "buckets, which saves one copy of every gradient in memory and a copy per step; the results are the same");
}

template <class V>
void visit(V& v, CheckpointConfig& c) {
  v.field("dir", c.dir, Any{}, "where checkpoints go, inside the run directory");
  // A fresh run moves it aside and rotation deletes files in it, so it must not reach anything else.
  v.check("dir", is_inside_run_dir(c.dir), [&] {
    return fmt::format("must be a directory inside the run directory: a relative path without '..' (got '{}')", c.dir);
  });
  v.field("every", c.every, Min{0}, "checkpoint every N epochs; 0 = off (also turns off `best.ckpt`)");
  v.field("every_steps", c.every_steps, Min{0}, "checkpoint every N optimizer steps; 0 = off");
  v.field("keep", c.keep, Min{1}, "the newest checkpoints kept besides `best.ckpt`");
}

template <class V>
void visit(V& v, OutputConfig& c) {
  v.field("dir", c.dir, Any{},
          "the run writes `config.yaml`, `train.log`, `metrics.jsonl` and `model.pt` into `<dir>/<name>/`");
  v.check("dir", !c.dir.empty(), [] { return std::string("must not be empty"); });
}

template <class V>
void visit(V& v, MlflowConfig& c) {
  v.field("uri", c.uri, Any{},
          "the MLflow tracking server, `http://host:port` or `https://...`; empty: the `MLFLOW_TRACKING_URI` "
          "environment variable, and no tracking when that is unset too. Rank 0 creates a run, logs the config as "
          "params (dotted keys), the metrics of every log interval and epoch with their step, then report.html, "
          "config.yaml and run.json as artifacts and the status (FINISHED, FAILED, KILLED on a signal). It never "
          "holds a step up: a server that cannot be reached is a warning, and what was not sent waits in "
          "`mlflow-pending.jsonl` in the run directory for `gputrain report --mlflow RUN_DIR`");
  v.check("uri", c.uri.empty() || c.uri.rfind("http://", 0) == 0 || c.uri.rfind("https://", 0) == 0, [&] {
    return fmt::format(
        "'{}' is not an http(s):// address; gputrain speaks the tracking server's REST API (start one with "
        "`mlflow server`), not a local store",
        c.uri);
  });
  v.field("experiment", c.experiment, Any{}, "the MLflow experiment the run goes into; created when it is missing");
  v.check("experiment", !c.experiment.empty(), [] { return std::string("must not be empty"); });
  v.field("run_name", c.run_name, Any{}, "the MLflow run's name; empty: the config's `name`");
  v.field("tags", c.tags, Any{}, "tags set on the MLflow run, a mapping of text: `{team: vision}`");
}

template <class V>
void visit(V& v, TrackingConfig& c) {
  v.section("mlflow", c.mlflow);
}

template <class V>
void visit(V& v, ExperimentConfig& c) {
  v.field("name", c.name, Any{}, "the run's name: it writes `<output.dir>/<name>/`");
  v.check("name", is_run_name(c.name), [&] {
    return fmt::format(
        "'{}' must start with a letter or digit and use only letters, digits, '.', '_' and '-' (it "
        "names the run directory)",
        c.name);
  });
  v.field("seed", c.seed, Any{}, "seeds weights, data order, augmentation and generated data");
  v.fixed_on_resume("seed", FixedOnResume::kAlways);
  v.field("device", c.device, Any{},
          "`auto` (CUDA when available, else CPU; logged), `cpu`, `cuda`, `cuda:N`, `mps`. `cuda` without a GPU is "
          "an error, never a silent fallback");
  v.field("gpus", c.gpus, Any{}, "`all` or a list of logical indices, as numbered after `CUDA_VISIBLE_DEVICES`");
  v.field("strategy", c.strategy, Any{},
          "`auto`: under a launcher with world size > 1, ddp; with several selected GPUs and no launcher, `train` "
          "starts one ddp process per GPU over NCCL (as `--nproc N`; never dp); else single. `ddp` on several GPUs "
          "without a launcher starts them too");
  v.section("data", c.data);
  v.section("model", c.model);
  v.fixed_on_resume("model", FixedOnResume::kAlways);
  v.section("optim", c.optim);
  v.section("train", c.train);
  v.check("train.profile.epoch", c.train.profile.epoch <= c.train.epochs, [&] {
    return fmt::format("epoch {} is after the run's last (train.epochs: {})", c.train.profile.epoch, c.train.epochs);
  });
  v.check("train.amp", !(c.train.amp == AmpMode::kFp16 && c.device.kind == DeviceKind::kCpu),
          [] { return std::string(kFp16NeedsCuda); });
  // Here rather than when training starts, so that `gputrain config` refuses what `train` would.
  v.check("data.batch_size",
          c.data.micro_batch_size || !c.data.batch_size || *c.data.batch_size % c.train.accumulation_steps == 0, [&] {
            return fmt::format(
                "{} is not divisible by train.accumulation_steps ({}); batch_size is the batch per optimizer "
                "step and each micro-batch takes an equal share",
                c.data.batch_size.value_or(0), c.train.accumulation_steps);
          });
  // Both stated: the batch must be a whole number of processes' worth of micro-batches.
  v.check("data.batch_size",
          !c.data.batch_size || !c.data.micro_batch_size ||
              *c.data.batch_size % (*c.data.micro_batch_size * c.train.accumulation_steps) == 0,
          [&] {
            return fmt::format(
                "{} disagrees with data.micro_batch_size: {} per forward pass x {} make {} per process, which {} "
                "does not divide into; set only one of the two",
                c.data.batch_size.value_or(0), c.data.micro_batch_size.value_or(0),
                count_of(c.train.accumulation_steps, "accumulation step"),
                c.data.micro_batch_size.value_or(0) * c.train.accumulation_steps, c.data.batch_size.value_or(0));
          });
  const bool measured = !c.data.batch_size && !c.data.micro_batch_size;  // data.batch_size: auto's measurement
  v.check("data.batch_size", !measured || c.train.target_batch > 0, [] {
    return std::string(
        "auto needs train.target_batch, the global batch per optimizer step to reach (e.g. "
        "--set train.target_batch=1024)");
  });
  v.check("data.micro_batch_size", c.data.batch_size || !c.data.micro_batch_size || c.train.target_batch == 0, [] {
    return std::string(
        "train.target_batch is for data.batch_size: auto's measurement, which chooses the micro-batch; set "
        "train.target_batch or this, not both");
  });
  v.check("train.accumulation_steps", !measured || c.train.accumulation_steps == 1,
          [] { return std::string("data.batch_size: auto chooses the accumulation steps; leave this key out"); });
  v.check("train.target_batch",
          c.train.target_batch == 0 || !c.data.batch_size || *c.data.batch_size == c.train.target_batch, [&] {
            return fmt::format(
                "{} disagrees with data.batch_size ({}); the target is for data.batch_size: auto, set one of the two",
                c.train.target_batch, c.data.batch_size.value_or(0));
          });
  v.section("dp", c.dp);
  v.section("ddp", c.ddp);
  v.section("checkpoint", c.checkpoint);
  v.section("output", c.output);
  v.section("tracking", c.tracking);
}

}  // namespace gputrain::config

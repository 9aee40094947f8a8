#pragma once
// PNG and JPEG files: read with libpng and libjpeg-turbo into uint8
// [C, H, W] pixels, and written from them (`gputrain datasets export`).
#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "gputrain/common/error.h"
#include "gputrain/data/dataset.h"

namespace gputrain::data::detail {

struct ImageShape {
  int64_t channels = 0, height = 0, width = 0;
  int64_t bytes() const { return channels * height * width; }
};

// The bytes of `file`, at most `limit` of them (0: all). Opened without
// blocking and refused unless a regular file: a FIFO or a device put in an
// image's place during a run would hold the loader, and the stop signals that
// wait on it, forever. Throws DataError naming the file.
std::string read_image_bytes(const std::filesystem::path& file, std::size_t limit = 0);

// What to do about an image that cannot be read.
inline constexpr const char* kUnreadableImageFix =
    "replace or remove the file, or set data.skip_bad_images: true to leave out the images that cannot be read";

// read() for image_folder's sample `index`: a DataError it throws names the sample too, and the way on (a
// file read per batch, after the split was opened: damaged, or changed since).
template <class Read>
decltype(auto) reading_sample(int64_t index, Read&& read) {
  try {
    return read();
  } catch (const DataError& e) {
    throw DataError(
        fmt::format("image_folder sample {}: {}; {} (checked when a run starts), then continue the run "
                    "with --resume auto",
                    index, e.what(), kUnreadableImageFix));
  }
}

// Whether `file` is named as an image gputrain reads: .png, .jpg or .jpeg, in any case.
bool is_image_file(const std::filesystem::path& file);

// The stored height and width of `file`, and whether it is grey (channels 1);
// reads the header only. Throws DataError naming the file, also when its
// height x width is above `max_pixels` (data.max_image_pixels).
ImageShape read_image_header(const std::filesystem::path& file, int64_t max_pixels);

// How a stored image is brought to the split's size, in this order.
struct ImageFit {
  int64_t shorter_side = 0;  // data.resize: torchvision's Resize(n); 0: off
  bool center_crop = false;  // data.center_crop: then the middle of the split's size
  bool resize = false;       // data.image_size: resized to the split's size (neither of the above)
};

// The height and width an image stored at `stored` has after `fit` towards `shape`.
std::array<int64_t, 2> fitted_size(ImageShape stored, const ImageFit& fit, ImageShape shape);

// The colours an image was stored in, when they are not the split's: it was converted.
enum class StoredColour { kAsAsked, kGrey, kColour, kCmyk };

// Decodes `file` into `out` as uint8 [shape.channels, shape.height,
// shape.width] (grey images become RGB and back as asked, CMYK JPEGs either),
// brought to shape's size by `fit`; a size other than shape's after it is a
// DataError naming both sizes. Throws DataError naming the file when it cannot
// be read or decoded (truncated JPEGs included), and before decoding when its
// stored height x width is above `max_pixels`. Returns the stored colours when converted.
StoredColour decode_image(const std::filesystem::path& file, ImageShape shape, const ImageFit& fit, int64_t max_pixels,
                          uint8_t* out);

// Decodes the part of `file` inside the box `draw_box` picks from its stored
// size, resized to shape's height x width (torchvision's bilinear with
// antialias) into `out` as uint8 [shape.channels, H, W]. A JPEG is decoded
// only around the box (rows and iMCU columns), and at the largest of
// libjpeg-turbo's DCT scalings (1/2, 1/4, 1/8) that keeps the box at least
// shape's size; the box is then placed in the scaled pixels to the nearest
// pixel. A PNG is decoded whole. Errors as decode_image's.
StoredColour decode_resized_crop(const std::filesystem::path& file, ImageShape shape, const DrawCropBox& draw_box,
                                 int64_t max_pixels, uint8_t* out);

// uint8 [C, H, W] pixels (C 1 or 3) as the bytes of a PNG file, or of a JPEG of `quality` (1-100).
std::string encode_png(const uint8_t* pixels, ImageShape shape);
std::string encode_jpeg(const uint8_t* pixels, ImageShape shape, int quality);

}  // namespace gputrain::data::detail

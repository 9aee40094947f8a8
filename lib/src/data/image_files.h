#pragma once
// PNG and JPEG files: read with libpng and libjpeg-turbo into uint8
// [C, H, W] pixels, and written from them (`gputrain datasets export`).
#include <cstdint>
#include <filesystem>
#include <string>

namespace gputrain::data::detail {

struct ImageShape {
  int64_t channels = 0, height = 0, width = 0;
  int64_t bytes() const { return channels * height * width; }
};

// Whether `file` is named as an image gputrain reads: .png, .jpg or .jpeg, in any case.
bool is_image_file(const std::filesystem::path& file);

// The stored height and width of `file`, and whether it is grey (channels 1);
// reads the header only. Throws DataError naming the file, also when its
// height x width is above `max_pixels` (data.max_image_pixels).
ImageShape read_image_header(const std::filesystem::path& file, int64_t max_pixels);

// Decodes `file` into `out` as uint8 [shape.channels, shape.height,
// shape.width] (grey images become RGB and back as asked). A stored size
// other than shape's is resized (bilinear, antialiased) when `resize`, else a
// DataError naming both sizes. Throws DataError naming the file when it cannot
// be read or decoded (truncated JPEGs included), and before decoding when its
// stored height x width is above `max_pixels`.
void decode_image(const std::filesystem::path& file, ImageShape shape, bool resize, int64_t max_pixels, uint8_t* out);

// uint8 [C, H, W] pixels (C 1 or 3) as the bytes of a PNG file, or of a JPEG of `quality` (1-100).
std::string encode_png(const uint8_t* pixels, ImageShape shape);
std::string encode_jpeg(const uint8_t* pixels, ImageShape shape, int quality);

}  // namespace gputrain::data::detail

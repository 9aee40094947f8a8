#include "images/image_files.h"

// jpeglib.h needs stdio.h (FILE) first, and jerror.h jpeglib.h's configuration (which warnings it declares).
// clang-format off
#include <cstdio>
#include <jpeglib.h>
#include <jerror.h>
// clang-format on
#include <fcntl.h>
#include <fmt/format.h>
#include <png.h>
#include <sys/stat.h>
#include <torch/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <csetjmp>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gputrain/common/error.h"
#include "images/image_ops.h"

namespace gputrain::data::detail {

namespace {

std::string lower_extension(const std::filesystem::path& file) {
  std::string extension = file.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension;
}

bool is_png(const std::filesystem::path& file) { return lower_extension(file) == ".png"; }

// An empty file (an interrupted copy) is named as such, not as the decoders' "invalid argument".
void require_content(const std::filesystem::path& file, const std::string& bytes) {
  if (bytes.empty()) throw DataError(fmt::format("{}: the file is empty (0 bytes), no image", file.string()));
}

std::string read_bytes(const std::filesystem::path& file) {
  std::string bytes = read_image_bytes(file);
  require_content(file, bytes);
  return bytes;
}

// Stored pixels, interleaved [H, W, C], as the decoders give them.
struct Decoded {
  std::vector<uint8_t> pixels;
  int64_t height = 0, width = 0, channels = 0;
  StoredColour colour = StoredColour::kAsAsked;
  CropBox box;  // JPEG decodes of a box: where it lies in `pixels`
};

// Refuses a stated size above `max_pixels` before anything that size is allocated: a few hundred bytes can
// claim 65500 x 65500 pixels (a decompression bomb).
void require_pixels(const std::filesystem::path& file, int64_t height, int64_t width, int64_t max_pixels) {
  if (height * width <= max_pixels) return;
  throw DataError(
      fmt::format("{}: the image is {}x{}, {} pixels, more than data.max_image_pixels ({}), the guard against "
                  "decompression bombs (small files that decode to huge images). Raise data.max_image_pixels if "
                  "images this large are meant",
                  file.string(), width, height, height * width, max_pixels));
}

// --- PNG, through libpng's simplified API (it converts palettes, 16 bits, alpha and grey/RGB itself).

ImageShape png_header(const std::filesystem::path& file, const std::string& bytes) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) {
    throw DataError(fmt::format("{}: not a readable PNG ({})", file.string(), image.message));
  }
  const bool grey = (image.format & PNG_FORMAT_FLAG_COLOR) == 0;
  ImageShape shape{grey ? 1 : 3, image.height, image.width};
  png_image_free(&image);
  return shape;
}

Decoded decode_png(const std::filesystem::path& file, const std::string& bytes, int64_t channels, int64_t max_pixels) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) {
    throw DataError(fmt::format("{}: not a readable PNG ({})", file.string(), image.message));
  }
  try {
    require_pixels(file, image.height, image.width, max_pixels);
  } catch (const DataError&) {
    png_image_free(&image);
    throw;
  }
  const bool grey = (image.format & PNG_FORMAT_FLAG_COLOR) == 0;
  image.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  // A 16-bit file without a gAMA or sRGB chunk holds sRGB values, as the files of every tool that writes them
  // do; libpng would take them as linear light and brighten them into sRGB (a 16-bit 162 x 257 became 207, not
  // 162). With this flag 16 bits become 8 by value / 257, as PIL and torchvision read them.
  image.flags |= PNG_IMAGE_FLAG_16BIT_sRGB;
  Decoded decoded;
  if (grey != (channels == 1)) decoded.colour = grey ? StoredColour::kGrey : StoredColour::kColour;
  decoded.height = image.height;
  decoded.width = image.width;
  decoded.channels = channels;
  decoded.pixels.resize(PNG_IMAGE_SIZE(image));
  // Alpha is composited onto black, as the pixels' stored colour values would show without it.
  if (!png_image_finish_read(&image, nullptr, decoded.pixels.data(), 0, nullptr)) {
    const std::string message = image.message;
    png_image_free(&image);
    throw DataError(fmt::format("{}: the PNG cannot be decoded ({})", file.string(), message));
  }
  return decoded;
}

// --- JPEG, through libjpeg-turbo. Its errors longjmp back here: no object
// with a destructor may be created between setjmp and the calls that fail.

struct JpegErrors {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_fail(j_common_ptr info) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

// Where libjpeg meets missing or damaged entropy-coded data it warns and
// fills the rest with grey: a file cut short, also one cut inside its scan and
// ended with an EOI marker (JWRN_HIT_MARKER), a bad Huffman or arithmetic
// code, a lost restart marker. Here each is an error. Other warnings
// (extraneous bytes before a marker, an unknown JFIF version or Adobe
// transform, a bad ICC profile, unusual scan parameters) are silent: files
// that raise them decode whole.
void jpeg_warn(j_common_ptr info, int level) {
  if (level != -1) return;  // trace messages, not warnings
  switch (info->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
#if JPEG_LIB_VERSION >= 70 || defined(C_ARITH_CODING_SUPPORTED) || defined(D_ARITH_CODING_SUPPORTED)
    case JWRN_ARITH_BAD_CODE:  // declared where jerror.h declares it
#endif
    case JWRN_MUST_RESYNC:
      jpeg_fail(info);
    default:
      return;
  }
}

// The largest of libjpeg's fast DCT scalings (1/8, 1/4, 1/2) whose output still covers `at_least`;
// 1 without a size to reach. Decoding an eighth of the pixels is several times faster.
unsigned int jpeg_scale_denominator(JDIMENSION height, JDIMENSION width, const ImageShape* at_least) {
  if (at_least == nullptr) return 1;
  for (unsigned int d : {8U, 4U, 2U}) {
    if ((height + d - 1) / d >= at_least->height && (width + d - 1) / d >= at_least->width) return d;
  }
  return 1;
}

// CMYK (4 bytes a pixel, as decoded) to RGB, or grey when `grey`: libjpeg
// converts no CMYK, which print workflows write. An Adobe marker means
// inverted values (255: no ink), as Photoshop stores them.
void cmyk_to_rgb(Decoded& out, bool grey, bool inverted) {
  const std::size_t pixels = out.pixels.size() / 4;
  std::vector<uint8_t> converted(pixels * (grey ? 1 : 3));
  for (std::size_t i = 0; i < pixels; ++i) {
    int light[4];  // 255 - ink, per channel
    for (int c = 0; c < 4; ++c) light[c] = inverted ? out.pixels[4 * i + c] : 255 - out.pixels[4 * i + c];
    const int r = light[0] * light[3] / 255, g = light[1] * light[3] / 255, b = light[2] * light[3] / 255;
    if (grey) {
      converted[i] = static_cast<uint8_t>((299 * r + 587 * g + 114 * b + 500) / 1000);  // ITU-R 601 luma
    } else {
      converted[3 * i] = static_cast<uint8_t>(r);
      converted[3 * i + 1] = static_cast<uint8_t>(g);
      converted[3 * i + 2] = static_cast<uint8_t>(b);
    }
  }
  out.pixels = std::move(converted);
  out.channels = grey ? 1 : 3;
}

// Which part of a JPEG to decode, and towards what size.
struct JpegRequest {
  // The size the pixels are resized to next, which the decoder's own
  // downscaling may approach first; null: none (decoded at the stored size).
  const ImageShape* at_least = nullptr;
  // Only this box of the stored image (with the iMCU columns and the rows
  // around it that libjpeg-turbo decodes anyway); unset: all of it.
  std::optional<CropBox> box;
};

// The rows or columns [first, first + count) of a stored axis, in an output
// scaled by 1/`scale` of `scaled_size` pixels: widened to whole output pixels,
// and by a margin on each side. libjpeg-turbo's fancy upsampling of the
// chroma (4:2:0, 4:2:2) blends each pixel with its neighbours' chroma, which
// at the edge of a cropped or skipped region it does not have: pixels there
// can differ from the whole decode's by tens of levels. Inside the margin the
// box's pixels are the whole decode's.
std::pair<JDIMENSION, JDIMENSION> scaled_span(int64_t first, int64_t count, unsigned int scale,
                                              JDIMENSION scaled_size) {
  constexpr int64_t kMargin = 4;  // output pixels: twice the reach of the upsampling filter (2)
  const auto begin = static_cast<JDIMENSION>(std::max<int64_t>(0, first / scale - kMargin));
  const auto end =
      static_cast<JDIMENSION>(std::min<int64_t>(scaled_size, (first + count + scale - 1) / scale + kMargin));
  return {begin, end - begin};
}

// The box's side in the decoded pixels: its stored bounds divided by `scale`
// (rounded), less where the decoded part starts; at scale 1 the box itself.
std::pair<int64_t, int64_t> side_within(int64_t first, int64_t count, unsigned int scale, JDIMENSION decoded_first,
                                        JDIMENSION decoded_count) {
  const auto scaled = [&](int64_t at) {
    const auto rounded = static_cast<int64_t>(std::llround(static_cast<double>(at) / scale));
    return std::clamp<int64_t>(rounded - decoded_first, 0, decoded_count);
  };
  const int64_t begin = scaled(first);
  return {begin, std::max<int64_t>(1, scaled(first + count) - begin)};
}

// Returns false (with errors.message) when libjpeg fails. `header_only`
// stops after the header: out's height, width and channels (1 when grey).
// `max_pixels` > 0: a header stating more stops before anything is allocated,
// leaving its stated size in `out` and no pixels.
bool run_jpeg(const std::string& bytes, int64_t channels, bool header_only, const JpegRequest& request, Decoded& out,
              JpegErrors& errors, int64_t max_pixels = 0) {
  jpeg_decompress_struct info{};
  info.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = jpeg_fail;
  errors.manager.emit_message = jpeg_warn;
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  out.height = info.image_height;
  out.width = info.image_width;
  const bool over_limit = max_pixels > 0 && out.height * out.width > max_pixels;
  if (header_only || over_limit) {
    out.channels = info.jpeg_color_space == JCS_GRAYSCALE ? 1 : 3;
    jpeg_destroy_decompress(&info);
    return true;
  }
  const bool cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
  const bool grey = info.jpeg_color_space == JCS_GRAYSCALE;
  out.colour = cmyk                      ? StoredColour::kCmyk
               : grey != (channels == 1) ? (grey ? StoredColour::kGrey : StoredColour::kColour)
                                         : StoredColour::kAsAsked;
  info.out_color_space = cmyk ? JCS_CMYK : channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  const CropBox box = request.box.value_or(CropBox{0, 0, out.height, out.width});
  info.scale_num = 1;
  info.scale_denom = jpeg_scale_denominator(box.height, box.width, request.at_least);
  jpeg_start_decompress(&info);
  const unsigned int scale = info.scale_denom;
  // The rows and columns to decode; libjpeg-turbo moves the first column back to an iMCU boundary.
  auto [first_row, rows] = scaled_span(box.top, box.height, scale, info.output_height);
  auto [first_column, columns] = scaled_span(box.left, box.width, scale, info.output_width);
  if (columns < info.output_width) jpeg_crop_scanline(&info, &first_column, &columns);
  if (first_row > 0) jpeg_skip_scanlines(&info, first_row);
  const auto [top, height] = side_within(box.top, box.height, scale, first_row, rows);
  const auto [left, width] = side_within(box.left, box.width, scale, first_column, columns);
  out.box = {top, left, height, width};
  out.height = rows;
  out.width = info.output_width;
  out.channels = info.output_components;
  const auto row_bytes = static_cast<std::size_t>(info.output_width) * static_cast<std::size_t>(info.output_components);
  out.pixels.resize(row_bytes * rows);  // `out` outlives a longjmp: it is the caller's
  uint8_t* base = out.pixels.data();
  while (info.output_scanline < first_row + rows) {
    JSAMPROW row = base + row_bytes * (info.output_scanline - first_row);
    jpeg_read_scanlines(&info, &row, 1);
  }
  // Rows below the box are left undecoded.
  if (info.output_scanline < info.output_height) {
    jpeg_abort_decompress(&info);
  } else {
    jpeg_finish_decompress(&info);
  }
  const bool inverted = info.saw_Adobe_marker;
  jpeg_destroy_decompress(&info);
  if (cmyk) cmyk_to_rgb(out, channels == 1, inverted);
  return true;
}

// libjpeg's message, and what to do where libjpeg-turbo's 8-bit build cannot read the file at all.
std::string jpeg_problem(const JpegErrors& errors) {
  const std::string message = errors.message;
  if (message.find("Unsupported JPEG data precision 12") == std::string::npos) return message;
  return message +
         ": a 12-bit JPEG, and gputrain reads 8-bit ones; convert it to 8 bits or to PNG (e.g. ImageMagick's "
         "`convert FILE -depth 8 FILE.png`)";
}

ImageShape jpeg_header(const std::filesystem::path& file, const std::string& bytes) {
  Decoded header;
  JpegErrors errors{};
  if (!run_jpeg(bytes, 0, true, {}, header, errors)) {
    throw DataError(fmt::format("{}: not a readable JPEG ({})", file.string(), jpeg_problem(errors)));
  }
  return {header.channels, header.height, header.width};
}

// Into `decoded`, whose pixel buffer is reused when it is large enough.
void decode_jpeg(const std::filesystem::path& file, const std::string& bytes, int64_t channels,
                 const JpegRequest& request, int64_t max_pixels, Decoded& decoded) {
  JpegErrors errors{};
  if (!run_jpeg(bytes, channels, false, request, decoded, errors, max_pixels)) {
    throw DataError(fmt::format("{}: the JPEG cannot be decoded ({})", file.string(), jpeg_problem(errors)));
  }
  // Over the limit, run_jpeg stopped after the header and left the stated size here.
  require_pixels(file, decoded.height, decoded.width, max_pixels);
}

}  // namespace

std::string read_image_bytes(const std::filesystem::path& file, std::size_t limit) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) throw DataError(fmt::format("{}: cannot open: {}", file.string(), std::strerror(errno)));
  struct Closing {
    int fd;
    ~Closing() { ::close(fd); }
  } closing{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw DataError(fmt::format("{}: cannot read: {}", file.string(), std::strerror(errno)));
  if (!S_ISREG(info.st_mode)) {
    const char* kind = S_ISDIR(info.st_mode)    ? "a directory"
                       : S_ISFIFO(info.st_mode) ? "a FIFO"
                       : S_ISSOCK(info.st_mode) ? "a socket"
                                                : "a device";
    throw DataError(fmt::format(
        "{}: is not a regular file ({}); it was one when the run started, so something replaced it. Images must "
        "stay regular files while the run reads them",
        file.string(), kind));
  }
  const auto size = static_cast<std::size_t>(info.st_size);
  std::string bytes;
  bytes.reserve(limit > 0 ? std::min(limit, size) : size);
  // Read in blocks, not a character at a time: the loader reads every image of every epoch.
  std::array<char, 1 << 16> block;
  while (limit == 0 || bytes.size() < limit) {
    const std::size_t want = limit == 0 ? block.size() : std::min(block.size(), limit - bytes.size());
    const ssize_t got = ::read(fd, block.data(), want);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw DataError(fmt::format("{}: cannot read: {}", file.string(), std::strerror(errno)));
    if (got == 0) break;
    bytes.append(block.data(), static_cast<std::size_t>(got));
  }
  return bytes;
}

bool is_image_file(const std::filesystem::path& file) {
  const std::string extension = lower_extension(file);
  return extension == ".png" || extension == ".jpg" || extension == ".jpeg";
}

ImageShape read_image_header(const std::filesystem::path& file, int64_t max_pixels) {
  // The size is usually within the first bytes; when metadata before it is
  // larger (a PNG's ICC profile or text chunks, a JPEG's EXIF), the whole file is read.
  constexpr std::size_t kFirst = 64 * 1024;
  const std::string bytes = read_image_bytes(file, kFirst);
  require_content(file, bytes);
  const auto header = [&](const std::string& some) {
    return is_png(file) ? png_header(file, some) : jpeg_header(file, some);
  };
  ImageShape shape;
  try {
    shape = header(bytes);
  } catch (const DataError&) {
    if (bytes.size() < kFirst) throw;  // the whole file was read
    shape = header(read_bytes(file));
  }
  require_pixels(file, shape.height, shape.width, max_pixels);
  return shape;
}

std::array<int64_t, 2> fitted_size(ImageShape stored, const ImageFit& fit, ImageShape shape) {
  if (fit.center_crop || fit.resize) return {shape.height, shape.width};
  if (fit.shorter_side > 0) return shorter_side_size(stored.height, stored.width, fit.shorter_side);
  return {stored.height, stored.width};
}

StoredColour decode_image(const std::filesystem::path& file, ImageShape shape, const ImageFit& fit, int64_t max_pixels,
                          uint8_t* out) {
  const std::string bytes = read_bytes(file);
  // The size the decoder's own downscaling may approach first: what the first resize makes.
  std::optional<ImageShape> at_least;
  if (fit.shorter_side > 0 && !is_png(file)) {
    const ImageShape stored = jpeg_header(file, bytes);
    const auto [height, width] = shorter_side_size(stored.height, stored.width, fit.shorter_side);
    at_least = ImageShape{shape.channels, height, width};
  } else if (fit.resize) {
    at_least = shape;
  }
  Decoded decoded;
  if (is_png(file)) {
    decoded = decode_png(file, bytes, shape.channels, max_pixels);
  } else {
    decode_jpeg(file, bytes, shape.channels, {at_least ? &*at_least : nullptr, {}}, max_pixels, decoded);
  }
  torch::Tensor image = torch::from_blob(const_cast<uint8_t*>(decoded.pixels.data()),
                                         {decoded.height, decoded.width, shape.channels}, torch::kUInt8)
                            .permute({2, 0, 1});
  if (fit.shorter_side > 0) {
    // From the stored size (the decoder may have scaled it down already), as torchvision computes it.
    const auto [height, width] = at_least ? std::array<int64_t, 2>{at_least->height, at_least->width}
                                          : shorter_side_size(decoded.height, decoded.width, fit.shorter_side);
    image = resized_crop(image, {0, 0, image.size(1), image.size(2)}, height, width);
  }
  if (fit.center_crop) {
    image = center_crop(image, shape.height, shape.width);
  } else if (fit.resize && (image.size(1) != shape.height || image.size(2) != shape.width)) {
    image = resized_crop(image, {0, 0, image.size(1), image.size(2)}, shape.height, shape.width);
  }
  if (image.size(1) != shape.height || image.size(2) != shape.width) {
    throw DataError(fmt::format("{}: the image is {}x{}{}, not {}x{} as the data set's; {}", file.string(),
                                image.size(2), image.size(1), fit.shorter_side > 0 ? " after data.resize" : "",
                                shape.width, shape.height,
                                fit.shorter_side > 0 ? "set data.center_crop to crop them to one size"
                                                     : "set data.image_size to resize them all"));
  }
  std::memcpy(out, image.contiguous().const_data_ptr<uint8_t>(), static_cast<std::size_t>(shape.bytes()));
  return decoded.colour;
}

StoredColour decode_resized_crop(const std::filesystem::path& file, ImageShape shape, const DrawCropBox& draw_box,
                                 int64_t max_pixels, uint8_t* out) {
  const std::string bytes = read_bytes(file);
  // Each loader thread decodes image after image: its pixel buffer is kept, not allocated and faulted in anew.
  thread_local Decoded decoded;
  if (is_png(file)) {
    decoded = decode_png(file, bytes, shape.channels, max_pixels);
    decoded.box = draw_box(decoded.height, decoded.width);
  } else {
    const ImageShape stored = jpeg_header(file, bytes);
    require_pixels(file, stored.height, stored.width, max_pixels);
    decode_jpeg(file, bytes, shape.channels, {&shape, draw_box(stored.height, stored.width)}, max_pixels, decoded);
  }
  const torch::Tensor image =
      torch::from_blob(decoded.pixels.data(), {decoded.height, decoded.width, shape.channels}, torch::kUInt8)
          .permute({2, 0, 1});
  const torch::Tensor cropped = resized_crop(image, decoded.box, shape.height, shape.width).contiguous();
  std::memcpy(out, cropped.const_data_ptr<uint8_t>(), static_cast<std::size_t>(shape.bytes()));
  return decoded.colour;
}

namespace {

std::vector<uint8_t> interleaved(const uint8_t* pixels, ImageShape shape) {
  const int64_t plane = shape.height * shape.width;
  std::vector<uint8_t> rows(static_cast<std::size_t>(shape.bytes()));
  uint8_t* to = rows.data();
  for (int64_t p = 0; p < plane; ++p)
    for (int64_t c = 0; c < shape.channels; ++c) *to++ = pixels[c * plane + p];
  return rows;
}

void require_writable_shape(ImageShape shape) {
  GPUTRAIN_CHECK(shape.channels == 1 || shape.channels == 3, "images of {} channels cannot be encoded", shape.channels);
}

}  // namespace

std::string encode_png(const uint8_t* pixels, ImageShape shape) {
  require_writable_shape(shape);
  const std::vector<uint8_t> rows = interleaved(pixels, shape);
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(shape.width);
  image.height = static_cast<png_uint_32>(shape.height);
  image.format = shape.channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, rows.data(), 0, nullptr)) {
    throw InternalError(fmt::format("libpng: {}", image.message));
  }
  std::string bytes(size, '\0');
  if (!png_image_write_to_memory(&image, bytes.data(), &size, 0, rows.data(), 0, nullptr)) {
    throw InternalError(fmt::format("libpng: {}", image.message));
  }
  bytes.resize(size);
  return bytes;
}

std::string encode_jpeg(const uint8_t* pixels, ImageShape shape, int quality) {
  require_writable_shape(shape);
  const std::vector<uint8_t> rows = interleaved(pixels, shape);
  jpeg_compress_struct info{};
  JpegErrors errors{};
  info.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = jpeg_fail;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  if (setjmp(errors.jump)) {
    jpeg_destroy_compress(&info);
    std::free(buffer);
    throw InternalError(fmt::format("libjpeg: {}", errors.message));
  }
  jpeg_create_compress(&info);
  jpeg_mem_dest(&info, &buffer, &size);
  info.image_width = static_cast<JDIMENSION>(shape.width);
  info.image_height = static_cast<JDIMENSION>(shape.height);
  info.input_components = static_cast<int>(shape.channels);
  info.in_color_space = shape.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  jpeg_start_compress(&info, TRUE);
  const auto row_bytes = static_cast<std::size_t>(shape.width * shape.channels);
  while (info.next_scanline < info.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(rows.data()) + row_bytes * info.next_scanline;
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  std::string bytes(reinterpret_cast<const char*>(buffer), size);
  std::free(buffer);
  return bytes;
}

}  // namespace gputrain::data::detail

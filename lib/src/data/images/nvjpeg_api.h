#pragma once
// nvJPEG's entry points as nvjpeg_library.cpp binds them from the loaded file.
// Only for files built with GPUTRAIN_WITH_NVJPEG (the wheel's nvjpeg.h).
#include <nvjpeg.h>

namespace gputrain::data::detail {

struct NvjpegApi {
  decltype(&nvjpegGetProperty) get_property = nullptr;
  decltype(&nvjpegCreateEx) create_ex = nullptr;
  decltype(&nvjpegDestroy) destroy = nullptr;
  decltype(&nvjpegJpegStateCreate) state_create = nullptr;
  decltype(&nvjpegJpegStateDestroy) state_destroy = nullptr;
  decltype(&nvjpegGetImageInfo) get_image_info = nullptr;
  decltype(&nvjpegDecode) decode = nullptr;
  decltype(&nvjpegDecodeBatchedInitialize) decode_batched_initialize = nullptr;
  decltype(&nvjpegDecodeBatched) decode_batched = nullptr;
};

}  // namespace gputrain::data::detail

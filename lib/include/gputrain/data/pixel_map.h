#pragma once
// How the loaders turn an image's pixel bytes into the floats a model sees,
// for the exports to repeat to the bit (train/export_model).
#include <cstdint>
#include <vector>

namespace gputrain::data {

// data.normalize's (byte / 255 - mean) / std folded into one multiply and one
// add per pixel, each rounded to float32, in that order: byte * scale + shift
// (never fused into one rounding: HostLoader and DeviceLoader agree).
struct ChannelMap {
  float scale = 1.0f / 255.0f;
  float shift = 0.0f;
};

// One map per channel of an image with `channels` channels, from `mean` and
// `std` (one value for all channels or one per channel, std > 0: the loaders
// check them), or 1 / 255 and 0 where `mean` is empty.
std::vector<ChannelMap> channel_maps(const std::vector<double>& mean, const std::vector<double>& std, int64_t channels);

}  // namespace gputrain::data

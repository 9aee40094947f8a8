// A conv2d layer's `whiten`: filters that whiten the training patches,
// computed the same way every time, fixed in the model, and refused where the
// layer cannot see the images.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/conv.h>

#include <string>

#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/data/generate.h"
#include "gputrain/models/factory.h"
#include "gputrain/models/whiten.h"
#include "support/temp_dir.h"

namespace gputrain::models {
namespace {

// Two channels, the second mostly the first: patches far from white.
torch::Tensor correlated_images() {
  auto gen = at::detail::createCPUGenerator(4);
  const torch::Tensor a = torch::randn({30, 1, 7, 7}, gen);
  return torch::cat({a, 0.9 * a + 0.2 * torch::randn({30, 1, 7, 7}, gen)}, 1);
}

// The uncentred covariance of a convolution's outputs over every sample and position: [channels, channels].
torch::Tensor output_covariance(const torch::Tensor& images, const torch::Tensor& filters) {
  const torch::Tensor out = torch::nn::functional::conv2d(images.to(torch::kFloat64), filters.to(torch::kFloat64));
  const torch::Tensor rows = out.transpose(0, 1).reshape({out.size(1), -1});
  return rows.mm(rows.t()) / static_cast<double>(rows.size(1));
}

TEST(Whitening, FirstHalfOfTheFiltersWhitensThePatchesAndTheSecondIsItsNegative) {
  const torch::Tensor images = correlated_images();
  const torch::Tensor filters = whitening_filters(images, 2, 1e-9);
  ASSERT_EQ(filters.sizes().vec(), (std::vector<int64_t>{16, 2, 2, 2}));  // 2 × 2 channels × 2²
  const torch::Tensor covariance = output_covariance(images, filters.narrow(0, 0, 8));
  EXPECT_TRUE(torch::allclose(covariance, torch::eye(8, torch::kFloat64), 0, 1e-4)) << covariance;
  EXPECT_TRUE(torch::equal(filters.narrow(0, 8, 8), -filters.narrow(0, 0, 8)));
  // Before whitening the patch dimensions are strongly correlated: the test above is not trivially true.
  const torch::Tensor raw = output_covariance(images, torch::eye(8).reshape({8, 2, 2, 2}));
  EXPECT_GT((raw - torch::diag(torch::diagonal(raw))).abs().max().item<double>(), 0.5);
}

TEST(Whitening, EpsShrinksTheSmallDirectionsAndTheSameImagesGiveTheSameFilters) {
  const torch::Tensor images = correlated_images();
  EXPECT_TRUE(torch::equal(whitening_filters(images, 2, 5e-4), whitening_filters(images.clone(), 2, 5e-4)));
  // λ / (λ + eps) on the diagonal: below 1 where an eigenvalue is comparable to eps.
  const torch::Tensor covariance = output_covariance(images, whitening_filters(images, 2, 1.0).narrow(0, 0, 8));
  EXPECT_LT(torch::diagonal(covariance).min().item<double>(), 0.5);
}

class WhitenedModel : public ::testing::Test {
 protected:
  void SetUp() override { data::write_idx_set(dir_.path(), {40, 10, 3, false}, /*gzip=*/false); }

  config::LoadedConfig load(const std::string& layers) {
    return config::load_config_text("data: {dataset: fashion_mnist, root: " + dir_.path().string() +
                                        ", normalize: {mean: [0.3], std: [0.4]}}\nmodel:\n  layers:\n" + layers,
                                    "w.yaml");
  }

  testing::TempDir dir_;
};

TEST_F(WhitenedModel, FirstConvGetsTheFiltersOfTheFirstNormalisedImagesAndDoesNotTrain) {
  const auto loaded = load(
      "    - {type: conv2d, out_channels: 8, kernel: 2, whiten: 25, whiten_eps: 0.01}\n"
      "    - gelu\n    - flatten\n    - linear\n");
  const auto train = data::make_dataset(loaded.config.data, data::Split::kTrain, 0);
  torch::nn::Sequential model = make_model(loaded.config.model, {{1, 28, 28}, 10});
  const torch::Tensor before = model->named_parameters()["conv1.weight"].clone();
  whiten_first_conv(model, loaded.config.model, *train, loaded.config.data.normalize);
  const torch::Tensor weight = model->named_parameters()["conv1.weight"];
  const torch::Tensor images = (train->inputs().narrow(0, 0, 25).to(torch::kFloat32) * (1.0f / 255) - 0.3f) / 0.4f;
  EXPECT_TRUE(torch::allclose(weight, whitening_filters(images, 2, 0.01), 1e-4, 1e-4));
  EXPECT_FALSE(torch::equal(weight, before));
  EXPECT_FALSE(weight.requires_grad());
  EXPECT_TRUE(model->named_parameters()["conv1.bias"].requires_grad());
}

TEST_F(WhitenedModel, ALaterLayerOrAnotherWidthIsAConfigErrorAtTheLayer) {
  const auto error = [&](const std::string& layers) -> std::string {
    try {
      make_model(load(layers).config.model, {{1, 28, 28}, 10});
    } catch (const ConfigError& e) {
      return e.what();
    }
    ADD_FAILURE() << layers;
    return "";
  };
  EXPECT_NE(error("    - {type: conv2d, out_channels: 8, kernel: 2}\n"
                  "    - {type: conv2d, out_channels: 32, kernel: 2, whiten: 5}\n    - flatten\n    - linear\n")
                .find("must be the network's first layer"),
            std::string::npos);
  EXPECT_NE(error("    - {type: conv2d, out_channels: 6, kernel: 2, whiten: 5}\n    - flatten\n    - linear\n")
                .find("set out_channels: 8 and groups: 1 (got 6 and 1)"),
            std::string::npos);
  EXPECT_NE(error("    - {type: conv2d, out_channels: 8, kernel: 2, whiten_bias_epochs: 3}\n    - flatten\n"
                  "    - linear\n")
                .find("w.yaml:4:7: model.layers[0] (conv2d): whiten_bias_epochs: 3 freezes the bias of a whitening "
                      "convolution, and this layer does not whiten; set whiten: N"),
            std::string::npos);
  EXPECT_NE(error("    - {type: conv2d, out_channels: 8, kernel: 2, whiten: 5, bias: false, whiten_bias_epochs: 3}\n"
                  "    - flatten\n    - linear\n")
                .find("whiten_bias_epochs: 3 freezes this layer's bias, and it has bias: false; set bias: true"),
            std::string::npos);
}

}  // namespace
}  // namespace gputrain::models

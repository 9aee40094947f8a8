// optim.lookahead's arithmetic on a hand-computed example, and its
// checkpointed state (the whole-run cases are in resume_test.cpp and
// stop_and_average_test.cpp).
#include "gputrain/train/lookahead.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "gputrain/common/error.h"

namespace gputrain::train {
namespace {

// Two trained parameters and a frozen one, which Lookahead leaves out.
struct TwoParameters : torch::nn::Module {
  TwoParameters() {
    a = register_parameter("a", torch::tensor({1.0f}));
    b = register_parameter("b", torch::tensor({2.0f, 4.0f}));
    frozen = register_parameter("frozen", torch::tensor({9.0f}), /*requires_grad=*/false);
  }
  // What an optimizer step would do: new values, in place.
  void step_to(float a_value, std::vector<float> b_values) {
    torch::NoGradGuard no_grad;
    a.fill_(a_value);
    b.copy_(torch::tensor(b_values));
    frozen.fill_(9.0f);
  }
  torch::Tensor a, b, frozen;
};

void expect_values(const torch::Tensor& t, std::vector<float> values) {
  EXPECT_TRUE(torch::equal(t, torch::tensor(values))) << t;
}

// k 2, alpha 0.25, slow weights begun at a = 1, b = (2, 4). Steps 1 and 3
// change nothing; step 2's fast a = 5, b = (10, -4) give slow a = 1 + 0.25 × 4
// = 2, b = (2 + 0.25 × 8, 4 − 0.25 × 8) = (4, 2), which the weights take; step
// 4's a = 10, b = (8, 6) give a = 2 + 0.25 × 8 = 4, b = (4 + 1, 2 + 1) = (5, 3).
TEST(Lookahead, EveryKthStepMovesTheSlowWeightsAlphaOfTheWayAndTheWeightsTakeThem) {
  TwoParameters model;
  Lookahead lookahead(model, {2, 0.25});
  lookahead.start();
  ASSERT_EQ(lookahead.state().size(), 2u) << "the frozen parameter has no slow copy";

  model.step_to(3, {6, 0});
  EXPECT_FALSE(lookahead.after_step(1));
  expect_values(model.a, {3});
  expect_values(model.b, {6, 0});

  model.step_to(5, {10, -4});
  EXPECT_TRUE(lookahead.after_step(2));
  expect_values(model.a, {2});
  expect_values(model.b, {4, 2});
  expect_values(lookahead.state()[0], {2});
  expect_values(lookahead.state()[1], {4, 2});

  model.step_to(7, {1, 1});
  EXPECT_FALSE(lookahead.after_step(3));
  model.step_to(10, {8, 6});
  EXPECT_TRUE(lookahead.after_step(4));
  expect_values(model.a, {4});
  expect_values(model.b, {5, 3});
  expect_values(model.frozen, {9});
  EXPECT_TRUE(model.a.requires_grad()) << "the weights stay the model's parameters";
}

// A checkpoint's slow weights replace the ones begun; the next sync starts from them.
TEST(Lookahead, LoadedSlowWeightsAreTheOnesTheNextSyncUses) {
  TwoParameters model;
  Lookahead lookahead(model, {1, 0.5});
  lookahead.load({torch::tensor({3.0f}), torch::tensor({0.0f, 8.0f})}, "c.ckpt");
  ASSERT_TRUE(lookahead.started());
  model.step_to(5, {2, 2});
  EXPECT_TRUE(lookahead.after_step(7));
  expect_values(model.a, {4});
  expect_values(model.b, {1, 5});

  Lookahead none(model, {1, 0.5});
  none.load({}, "old.ckpt");
  EXPECT_FALSE(none.started()) << "a checkpoint without slow weights leaves them to start()";
}

TEST(Lookahead, SlowWeightsThatDoNotFitTheModelAreACheckpointErrorNamingTheFile) {
  TwoParameters model;
  Lookahead lookahead(model, {5, 0.5});
  std::string message;  // stays empty when nothing is thrown
  try {
    lookahead.load({torch::tensor({1.0f}), torch::tensor({1.0f, 2.0f, 3.0f})}, "c.ckpt");
  } catch (const CheckpointError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("c.ckpt: tensor 1 of its slow weights (optim.lookahead) does not fit"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace gputrain::train

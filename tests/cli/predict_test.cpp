// `gputrain predict` end to end: a model trained on a csv table and on npy
// arrays applied to new samples, and inputs that do not match the model.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "gputrain/data/export.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::testing {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class Predict : public ::testing::Test {
 protected:
  // Trains `model` on the data in `data` for one epoch; returns the checkpoint of its end.
  std::string train(const std::string& data, const std::string& model = "{name: mlp, hidden: [8]}") {
    const auto config = write_text(dir_ / "p.yaml", "name: p\ndevice: cpu\ndata: " + data + "\nmodel: " + model +
                                                        "\noptim: {name: sgd, lr: 0.1}\ntrain: {epochs: 1, "
                                                        "tensorboard: false}\noutput: {dir: " +
                                                        (dir_ / "runs").string() + "}\n");
    const ProcessResult r = run_gputrain({"train", "--config", config.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return (dir_ / "runs" / "p" / "checkpoints" / "best.ckpt").string();
  }
  TempDir dir_;
};

TEST_F(Predict, ATableGetsItsLabelsAndProbabilitiesPerRow) {
  std::filesystem::create_directories(dir_ / "table");
  std::string train_rows = "x,y,kind\n";
  for (int i = 0; i < 12; ++i)
    train_rows += std::to_string(i) + "," + std::to_string(i % 3) + (i % 2 ? ",odd\n" : ",even\n");
  write_text(dir_ / "table" / "train.csv", train_rows);
  write_text(dir_ / "table" / "test.csv", "x,y,kind\n1,1,odd\n2,2,even\n");
  const std::string checkpoint = train("{dataset: csv, root: " + (dir_ / "table").string() +
                                       ", target_column: kind, batch_size: 4, num_workers: 0}");
  write_text(dir_ / "new.csv", "x,y\n3,0\n4,1\n5,2\n");
  const ProcessResult r = run_gputrain({"predict", "--checkpoint", checkpoint, "--input", (dir_ / "new.csv").string(),
                                        "--out", (dir_ / "preds.csv").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(dir_ / "preds.csv");
  std::stringstream text;
  text << in.rdbuf();
  const auto lines = lines_of(text.str());
  ASSERT_EQ(lines.size(), 4u) << text.str();
  EXPECT_EQ(lines[0], "sample,prediction,class_name,p_even,p_odd");
  for (std::size_t row = 1; row < lines.size(); ++row) {
    EXPECT_EQ(lines[row].rfind(std::to_string(row - 1) + ",", 0), 0u) << lines[row];
    EXPECT_TRUE(lines[row].find(",0,even,") != std::string::npos || lines[row].find(",1,odd,") != std::string::npos)
        << lines[row];  // the class index, then its name
  }
  // The target's column may stay; other columns must match the training table's.
  write_text(dir_ / "with_target.csv", "x,y,kind\n3,0,odd\n");
  EXPECT_EQ(
      run_gputrain({"predict", "--checkpoint", checkpoint, "--input", (dir_ / "with_target.csv").string()}).exit_code,
      0);
  write_text(dir_ / "wrong.csv", "x,z\n3,0\n");
  const ProcessResult wrong =
      run_gputrain({"predict", "--checkpoint", checkpoint, "--input", (dir_ / "wrong.csv").string()});
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.err.find("has the columns x, z, but the model was trained on"), std::string::npos) << wrong.err;
}

// Issue 37 #6: predict --out and export --out never replace one of their
// inputs, and replace another existing file only with --force.
TEST_F(Predict, AnOutputNeverReplacesAnInputAndAnExistingFileOnlyWithForce) {
  std::filesystem::create_directories(dir_ / "table");
  write_text(dir_ / "table" / "train.csv", "x,y\n0,0\n1,1\n2,0\n3,1\n");
  write_text(dir_ / "table" / "test.csv", "x,y\n1,1\n2,0\n");
  const std::string checkpoint = train("{dataset: csv, root: " + (dir_ / "table").string() + ", batch_size: 2}");
  const std::string input = write_text(dir_ / "new.csv", "x\n3\n").string();
  const std::string config = (dir_ / "p.yaml").string(), model = (dir_ / "runs" / "p" / "model.pt").string();
  std::map<std::string, std::string> before;
  for (const std::string& file : {checkpoint, input, config, model}) before[file] = read_text(file);
  const auto predict = [&](const std::string& weights, const std::string& out, bool force = false) {
    std::vector<std::string> args{"predict", "--checkpoint", weights, "--config", config,
                                  "--input", input,          "--out", out};
    if (force) args.push_back("--force");
    return run_gputrain(args);
  };
  for (const auto& [weights, out] : std::vector<std::pair<std::string, std::string>>{
           {checkpoint, checkpoint}, {checkpoint, input}, {checkpoint, config}, {model, model}}) {
    const ProcessResult r = predict(weights, out, /*force=*/true);
    EXPECT_EQ(r.exit_code, 2) << out << r.err;
    EXPECT_NE(r.err.find("--out " + out + ": is the "), std::string::npos) << r.err;
  }
  const ProcessResult exported = run_gputrain({"export", "--checkpoint", checkpoint, "--out", model});
  EXPECT_EQ(exported.exit_code, 2) << exported.err;
  EXPECT_NE(exported.err.find("--out " + model + ": exists; add --force"), std::string::npos) << exported.err;
  for (const auto& [file, bytes] : before) EXPECT_EQ(read_text(file), bytes) << file;

  const std::string preds = (dir_ / "preds.csv").string();
  write_text(preds, "mine");
  const ProcessResult kept = predict(checkpoint, preds);
  EXPECT_EQ(kept.exit_code, 2) << kept.err;
  EXPECT_EQ(read_text(preds), "mine");
  ASSERT_EQ(predict(checkpoint, preds, /*force=*/true).exit_code, 0);
  EXPECT_EQ(read_text(preds).rfind("sample,prediction", 0), 0u);
  EXPECT_EQ(run_gputrain({"export", "--checkpoint", checkpoint, "--out", model, "--force"}).exit_code, 0);
}

TEST_F(Predict, ArraysMustHaveTheTrainingSamplesShape) {
  std::filesystem::create_directories(dir_ / "arrays");
  data::write_npy(dir_ / "arrays" / "train_inputs.npy", torch::rand({16, 1, 4, 4}).mul(255).to(torch::kUInt8));
  data::write_npy(dir_ / "arrays" / "train_targets.npy", torch::arange(16, torch::kInt64).remainder(2));
  data::write_npy(dir_ / "arrays" / "test_inputs.npy", torch::rand({4, 1, 4, 4}).mul(255).to(torch::kUInt8));
  data::write_npy(dir_ / "arrays" / "test_targets.npy", torch::arange(4, torch::kInt64).remainder(2));
  const std::string checkpoint =
      train("{dataset: npy, root: " + (dir_ / "arrays").string() +
                ", batch_size: 4, num_workers: 0, normalize: {mean: "
                "[0.5], std: [0.25]}}",
            "{name: layers, layers: [{type: conv2d, out_channels: 2, kernel: 3}, relu, flatten, linear]}");
  data::write_npy(dir_ / "new.npy", torch::rand({5, 4, 4}).mul(255).to(torch::kUInt8));  // [N, H, W]: one channel
  const ProcessResult r = run_gputrain({"predict", "--checkpoint", checkpoint, "--input", (dir_ / "new.npy").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out;
  EXPECT_EQ(lines[0], "sample,prediction,p_0,p_1");
  data::write_npy(dir_ / "wide.npy", torch::zeros({2, 1, 5, 5}, torch::kUInt8));
  const ProcessResult wide =
      run_gputrain({"predict", "--checkpoint", checkpoint, "--input", (dir_ / "wide.npy").string()});
  EXPECT_EQ(wide.exit_code, 2);
  EXPECT_NE(wide.err.find("holds uint8 image samples of [1, 5, 5], but the model was trained on uint8 images of "
                          "[1, 4, 4]"),
            std::string::npos)
      << wide.err;
  const ProcessResult text =
      run_gputrain({"predict", "--checkpoint", checkpoint, "--input", (dir_ / "p.yaml").string()});
  EXPECT_EQ(text.exit_code, 2);
  EXPECT_NE(text.err.find("a .npy of inputs or a .csv"), std::string::npos) << text.err;
}

TEST_F(Predict, ImagesAndImageFoldersGetOneRowPerFile) {
  const std::string images = make_image_folder(dir_.path(), "png", 40, 10).string();
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string checkpoint =
      train("{dataset: image_folder, root: " + images + ", image_size: 14, batch_size: 10, num_workers: 0}");

  const auto first = *std::filesystem::directory_iterator(dir_ / "images" / "test" / "3");
  const ProcessResult one = run_gputrain({"predict", "--checkpoint", checkpoint, "--input", first.path().string()});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto rows = lines_of(one.out);
  ASSERT_EQ(rows.size(), 2u) << one.out;
  EXPECT_EQ(rows[0], "sample,prediction,class_name,p_0,p_1,p_2,p_3,p_4,p_5,p_6,p_7,p_8,p_9");
  EXPECT_EQ(rows[1].rfind(first.path().filename().string() + ",", 0), 0u) << rows[1];

  const ProcessResult all =
      run_gputrain({"predict", "--checkpoint", checkpoint, "--input", (dir_ / "images" / "test").string()});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const auto lines = lines_of(all.out);
  ASSERT_EQ(lines.size(), 11u) << all.out;
  EXPECT_EQ(lines[1].rfind("0/", 0), 0u) << lines[1];  // the path within the folder, folders in sorted order

  write_text(dir_ / "broken.png", "not a png");
  const ProcessResult broken =
      run_gputrain({"predict", "--checkpoint", checkpoint, "--input", (dir_ / "broken.png").string()});
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.err.find("broken.png: not a readable PNG"), std::string::npos) << broken.err;
}

TEST_F(Predict, FashionMnistRowsNameThePredictedClass) {
  const std::string images = make_image_folder(dir_.path(), "png", 20, 10).string(), idx = (dir_ / "idx").string();
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string checkpoint = train("{dataset: fashion_mnist, root: " + idx + ", batch_size: 10, num_workers: 0}");
  const ProcessResult r =
      run_gputrain({"predict", "--checkpoint", checkpoint, "--input", (dir_ / "images" / "test").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 11u) << r.out;
  EXPECT_EQ(lines[0],
            "sample,prediction,class_name,p_T-shirt/top,p_Trouser,p_Pullover,p_Dress,p_Coat,p_Sandal,p_Shirt,"
            "p_Sneaker,p_Bag,p_Ankle boot");
  const std::vector<std::string> names{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                       "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  for (std::size_t row = 1; row < lines.size(); ++row) {
    std::istringstream fields(lines[row]);
    std::string sample, index, name;
    std::getline(fields, sample, ',');
    std::getline(fields, index, ',');
    std::getline(fields, name, ',');
    EXPECT_EQ(name, names.at(std::stoul(index))) << lines[row];
  }
}

}  // namespace
}  // namespace gputrain::testing

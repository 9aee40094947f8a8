// `gputrain predict` end to end: a model trained on a csv table and on npy
// arrays applied to new samples, and inputs that do not match the model.
#include <gtest/gtest.h>

#include <cmath>
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

// The p_<class> columns of a predictions CSV (fields without quotes), row by row.
std::vector<std::vector<double>> probabilities(const std::string& csv) {
  const auto split = [](const std::string& line) {
    std::vector<std::string> fields;
    std::istringstream in(line);
    for (std::string field; std::getline(in, field, ',');) fields.push_back(field);
    return fields;
  };
  const auto lines = lines_of(csv);
  const std::vector<std::string> header = split(lines.at(0));
  std::vector<std::vector<double>> rows;
  for (std::size_t line = 1; line < lines.size(); ++line) {
    const std::vector<std::string> fields = split(lines[line]);
    std::vector<double>& row = rows.emplace_back();
    for (std::size_t column = 0; column < header.size(); ++column) {
      if (header[column].rfind("p_", 0) == 0) row.push_back(std::stod(fields.at(column)));
    }
  }
  return rows;
}

// The same predictions, each probability to 1e-5: two processes of one binary
// on one machine, but no promise of the same bits (the CSV rounds to 6 digits).
void expect_same_predictions(const std::string& a, const std::string& b) {
  const auto first = probabilities(a), second = probabilities(b);
  ASSERT_EQ(first.size(), second.size()) << a << b;
  for (std::size_t row = 0; row < first.size(); ++row) {
    ASSERT_EQ(first[row].size(), second[row].size());
    for (std::size_t c = 0; c < first[row].size(); ++c) EXPECT_NEAR(first[row][c], second[row][c], 1e-5) << row;
  }
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

// Issue 62 #11: an input is never an output, --force or not: export's own
// --config file, and a file inside the folder predict reads (--input).
TEST_F(Predict, AnInputIsNeverAnOutputEvenWithForce) {
  std::filesystem::create_directories(dir_ / "table");
  write_text(dir_ / "table" / "train.csv", "x,y\n0,0\n1,1\n2,0\n3,1\n");
  write_text(dir_ / "table" / "test.csv", "x,y\n1,1\n2,0\n");
  train("{dataset: csv, root: " + (dir_ / "table").string() + ", batch_size: 2}");
  const std::string config = (dir_ / "p.yaml").string(), model = (dir_ / "runs" / "p" / "model.pt").string();
  const std::string yaml = read_text(config);
  const ProcessResult exported = run_gputrain(
      {"export", "--checkpoint", model, "--config", config, "--format", "onnx", "--out", config, "--force"});
  EXPECT_EQ(exported.exit_code, 2) << exported.err;
  EXPECT_NE(exported.err.find("--out " + config + ": is the --config file itself (" + config + ")"), std::string::npos)
      << exported.err;
  EXPECT_EQ(read_text(config), yaml);

  const std::string image = write_text(dir_ / "images" / "bag" / "3.png", "the bytes of an image").string();
  const ProcessResult predicted = run_gputrain({"predict", "--checkpoint", model, "--config", config, "--input",
                                                (dir_ / "images").string(), "--out", image, "--force"});
  EXPECT_EQ(predicted.exit_code, 2) << predicted.err;
  EXPECT_NE(predicted.err.find("--out " + image + ": lies inside " + (dir_ / "images").string() +
                               " (--input), whose files this command reads; an input is never an output"),
            std::string::npos)
      << predicted.err;
  EXPECT_EQ(read_text(image), "the bytes of an image");
}

// Issue 62 #2: a run's checkpoints and model.pt carry what predict, test and
// export need of the training data (the sample shape, the classes), so the
// model works after that data is deleted, as it did with it.
TEST_F(Predict, AModelPredictsTestsAndExportsWithoutItsTrainingData) {
  const auto write_set = [&](const std::filesystem::path& root, const std::vector<std::string>& splits,
                             int64_t features, int64_t classes) {
    std::filesystem::create_directories(root);
    for (const std::string& split : splits) {
      data::write_npy(root / (split + "_inputs.npy"), torch::randn({12, features}));
      data::write_npy(root / (split + "_targets.npy"), torch::arange(12, torch::kInt64).remainder(classes));
    }
  };
  torch::manual_seed(0);
  write_set(dir_ / "arrays", {"train", "test"}, 5, 3);
  const std::string checkpoint =
      train("{dataset: npy, root: " + (dir_ / "arrays").string() + ", batch_size: 4, num_workers: 0}");
  const std::string run = (dir_ / "runs" / "p").string(), model = run + "/model.pt", config = run + "/config.yaml";
  data::write_npy(dir_ / "new.npy", torch::randn({6, 5}));
  const std::string input = (dir_ / "new.npy").string();
  const ProcessResult with_data = run_gputrain({"predict", "--checkpoint", checkpoint, "--input", input});
  ASSERT_EQ(with_data.exit_code, 0) << with_data.err;

  std::filesystem::remove_all(dir_ / "arrays");
  for (const auto& weights : std::vector<std::vector<std::string>>{{checkpoint}, {model, "--config", config}}) {
    std::vector<std::string> args{"predict", "--checkpoint"};
    args.insert(args.end(), weights.begin(), weights.end());
    args.insert(args.end(), {"--input", input});
    const ProcessResult r = run_gputrain(args);
    ASSERT_EQ(r.exit_code, 0) << weights[0] << r.err;
    EXPECT_EQ(lines_of(r.out).at(0), "sample,prediction,p_0,p_1,p_2");
    EXPECT_NE(
        r.err.find("the model's training data: npy: features of [5], 3 classes, as " + weights[0] + " describes it"),
        std::string::npos)
        << r.err;
    expect_same_predictions(with_data.out, r.out);

    // Tested on other data: a test split alone, whose labels use 2 of the 3 classes.
    write_set(dir_ / "other", {"test"}, 5, 2);
    std::vector<std::string> test{"test", "--checkpoint"};
    test.insert(test.end(), weights.begin(), weights.end());
    test.insert(test.end(), {"--set", "data.root=" + (dir_ / "other").string()});
    const ProcessResult tested = run_gputrain(test);
    ASSERT_EQ(tested.exit_code, 0) << tested.err;
    EXPECT_NE(tested.out.find("Test set: Average loss: "), std::string::npos) << tested.out;
    EXPECT_NE(tested.out.find("Accuracy of class 2: no test samples"), std::string::npos) << tested.out;

    std::vector<std::string> exported{
        "export", "--format", "pytorch", "--force", "--out", (dir_ / "exported.py").string(), "--checkpoint"};
    exported.insert(exported.end(), weights.begin(), weights.end());
    const ProcessResult e = run_gputrain(exported);
    ASSERT_EQ(e.exit_code, 0) << e.err;
    EXPECT_NE(read_text(dir_ / "exported.py").find("nn.Linear(8, 3, bias=True)"), std::string::npos);
  }
  // Other data that cannot feed the model is refused, naming both.
  write_set(dir_ / "wide", {"test"}, 6, 3);
  const ProcessResult wide =
      run_gputrain({"test", "--checkpoint", checkpoint, "--set", "data.root=" + (dir_ / "wide").string()});
  EXPECT_EQ(wide.exit_code, 2) << wide.err;
  EXPECT_NE(wide.err.find("the test split " + (dir_ / "wide").string() +
                          " holds features of [6], but the model was trained on features of [5]"),
            std::string::npos)
      << wide.err;
}

// Issue 62 #2 for images: a model tests on another folder of test images
// alone, its classes and image size those it was trained on.
TEST_F(Predict, AnImageModelTestsOnAnotherFolderWithoutItsTrainingImages) {
  const std::string images = make_image_folder(dir_.path(), "png", 40, 10).string();
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string checkpoint = train("{dataset: image_folder, root: " + images + ", batch_size: 10, num_workers: 0}");
  std::filesystem::create_directories(dir_ / "other");
  std::filesystem::rename(dir_ / "images" / "test", dir_ / "other" / "test");
  std::filesystem::remove_all(dir_ / "images");
  const ProcessResult tested =
      run_gputrain({"test", "--checkpoint", checkpoint, "--set", "data.root=" + (dir_ / "other").string()});
  ASSERT_EQ(tested.exit_code, 0) << tested.err;
  EXPECT_NE(tested.out.find("Accuracy: "), std::string::npos) << tested.out;
  std::filesystem::create_directories(dir_ / "other" / "test" / "unknown");
  std::filesystem::copy_file(*std::filesystem::directory_iterator(dir_ / "other" / "test" / "3"),
                             dir_ / "other" / "test" / "unknown" / "x.png");
  const ProcessResult unknown =
      run_gputrain({"test", "--checkpoint", checkpoint, "--set", "data.root=" + (dir_ / "other").string()});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown is a class the model was not trained on; its classes: 0, 1, 2"),
            std::string::npos)
      << unknown.err;
}

// Issue 62 #2 for a table: its columns and class names travel with the model too.
TEST_F(Predict, ATableModelKeepsItsColumnsAndClassNamesWithoutItsTable) {
  std::filesystem::create_directories(dir_ / "table");
  std::string rows = "x,y,kind\n";
  for (int i = 0; i < 12; ++i) rows += std::to_string(i) + "," + std::to_string(i % 3) + (i % 2 ? ",odd\n" : ",even\n");
  write_text(dir_ / "table" / "train.csv", rows);
  write_text(dir_ / "table" / "test.csv", "x,y,kind\n1,1,odd\n2,2,even\n");
  const std::string checkpoint = train("{dataset: csv, root: " + (dir_ / "table").string() +
                                       ", target_column: kind, batch_size: 4, num_workers: 0}");
  std::filesystem::remove_all(dir_ / "table");
  write_text(dir_ / "new.csv", "x,y\n3,0\n4,1\n");
  const ProcessResult r = run_gputrain({"predict", "--checkpoint", checkpoint, "--input", (dir_ / "new.csv").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out).at(0), "sample,prediction,class_name,p_even,p_odd");
  write_text(dir_ / "wrong.csv", "x,z\n3,0\n");
  const ProcessResult wrong =
      run_gputrain({"predict", "--checkpoint", checkpoint, "--input", (dir_ / "wrong.csv").string()});
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.err.find("has the columns x, z, but the model was trained on x, y and the target 'kind'"),
            std::string::npos)
      << wrong.err;
  // A test table whose classes are named otherwise would score against the wrong labels.
  write_text(dir_ / "other" / "test.csv", "x,y,kind\n1,1,cat\n2,2,dog\n");
  const ProcessResult renamed =
      run_gputrain({"test", "--checkpoint", checkpoint, "--set", "data.root=" + (dir_ / "other").string()});
  EXPECT_EQ(renamed.exit_code, 2);
  EXPECT_NE(renamed.err.find("names its classes cat, dog, but the model's are even, odd"), std::string::npos)
      << renamed.err;
}

// Issue 62 #8: predict scores images as test does, by the mean of the run's
// test-time views (train.tta), and says so; --tta off scores the image alone,
// as the exported network does, which export says.
TEST_F(Predict, PredictAndTestScoreTheRunsTestTimeViewsAlike) {
  // The class is the bright quarter, top left or top right: mirroring an image
  // turns it into the other class, so the views disagree and their mean
  // scores far from the image alone.
  const auto write_split = [&](const std::string& split, int64_t n) {
    const torch::Tensor labels = torch::arange(n, torch::kInt64).remainder(2);
    torch::Tensor images = torch::randint(0, 40, {n, 1, 8, 8}, torch::kUInt8);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t left = labels[i].item<int64_t>() == 0 ? 0 : 4;
      images[i].narrow(1, 0, 4).narrow(2, left, 4).fill_(220);
    }
    data::write_npy(dir_ / "arrays" / (split + "_inputs.npy"), images);
    data::write_npy(dir_ / "arrays" / (split + "_targets.npy"), labels);
    return labels;
  };
  torch::manual_seed(0);
  std::filesystem::create_directories(dir_ / "arrays");
  write_split("train", 32);
  const torch::Tensor labels = write_split("test", 16);
  const auto config =
      write_text(dir_ / "p.yaml", "name: p\ndevice: cpu\ndata: {dataset: npy, root: " + (dir_ / "arrays").string() +
                                      ", batch_size: 8, num_workers: 0}\nmodel: {name: layers, "
                                      "layers: [flatten, linear]}\noptim: {name: adam, lr: 0.05}\n"
                                      "train: {epochs: 5, tensorboard: false, tta: {hflip: true, "
                                      "translate: 1}}\noutput: {dir: " +
                                      (dir_ / "runs").string() + "}\n");
  ASSERT_EQ(run_gputrain({"train", "--config", config.string()}).exit_code, 0);
  const std::string checkpoint = (dir_ / "runs" / "p" / "checkpoints" / "best.ckpt").string();

  const ProcessResult tested = run_gputrain({"test", "--checkpoint", checkpoint});
  ASSERT_EQ(tested.exit_code, 0) << tested.err;
  const std::string views =
      "test-time views: 10 per image, their outputs averaged (train.tta: the image, shifted 1 "
      "pixel up, down, left and right, and each of those mirrored)";
  EXPECT_NE(tested.err.find(views), std::string::npos) << tested.err;
  const std::string mark = "Average loss: ";
  const double test_loss = std::stod(tested.out.substr(tested.out.find(mark) + mark.size()));
  // The mean cross-entropy of predict's probabilities on the test images, as test computes it.
  const auto predicted_loss = [&](const std::vector<std::string>& more) {
    std::vector<std::string> args{"predict", "--checkpoint", checkpoint, "--input",
                                  (dir_ / "arrays" / "test_inputs.npy").string()};
    args.insert(args.end(), more.begin(), more.end());
    const ProcessResult r = run_gputrain(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const bool alone = !more.empty() && more.back() == "off";
    EXPECT_NE(r.err.find(alone ? "test-time views: none, each image alone" : views), std::string::npos) << r.err;
    const auto rows = probabilities(r.out);
    double sum = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) sum -= std::log(rows[i].at(labels[i].item<int64_t>()));
    return sum / static_cast<double>(rows.size());
  };
  // test prints 4 decimals and predict 6 digits a probability: 1e-3 holds both, while the
  // views' mean and the image alone differ by far more here (checked below).
  EXPECT_NEAR(predicted_loss({}), test_loss, 1e-3);
  EXPECT_NEAR(predicted_loss({"--tta", "run"}), test_loss, 1e-3);
  EXPECT_GT(std::abs(predicted_loss({"--tta", "off"}) - test_loss), 0.05) << test_loss;
  const ProcessResult alone = run_gputrain({"test", "--checkpoint", checkpoint, "--tta", "off"});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_NE(alone.err.find("test-time views: none, each image alone"), std::string::npos) << alone.err;

  for (const std::string file : {"m.onnx", "m.py"}) {
    const ProcessResult e = run_gputrain({"export", "--checkpoint", checkpoint, "--format",
                                          file == "m.py" ? "pytorch" : "onnx", "--out", (dir_ / file).string()});
    ASSERT_EQ(e.exit_code, 0) << e.err;
    EXPECT_NE(e.err.find("test-time views are not inside the exported network: it scores each image alone, as "
                         "`gputrain predict --tta off` does"),
              std::string::npos)
        << e.err;
    EXPECT_NE(read_text(dir_ / file).find(file == "m.py" ? "TEST_TIME_VIEWS = " : "test_time_views"), std::string::npos)
        << file;
  }
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

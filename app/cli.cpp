// gputrain's command line: parse argv, read the environment once, dispatch to
// one command, and map every error to its exit code. Nothing in lib/ exits.
#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "build_commit.h"
#include "commands.h"
#include "gputrain/common/error.h"
#include "gputrain/device/versions.h"
#include "logging_setup.h"
#include "signals.h"
#include "standard_output.h"

namespace {

std::optional<std::string> value_of(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::optional<std::string>(value) : std::nullopt;
}

std::optional<gputrain::app::EnvValue> variable(const char* name) {
  std::optional<std::string> value = value_of(name);
  if (!value) return std::nullopt;
  return gputrain::app::EnvValue{name, std::move(*value)};
}

gputrain::app::Environment read_environment() {
  gputrain::app::Environment env;
  env.cuda_visible_devices = value_of("CUDA_VISIBLE_DEVICES");
  env.rank = variable("RANK");
  env.local_rank = variable("LOCAL_RANK");
  env.world_size = variable("WORLD_SIZE");
  if (!env.rank && !env.local_rank && !env.world_size) {  // srun sets only its own
    env.rank = variable("SLURM_PROCID");
    env.local_rank = variable("SLURM_LOCALID");
    env.world_size = variable("SLURM_NTASKS");
  }
  env.master_addr = variable("MASTER_ADDR");
  env.master_port = variable("MASTER_PORT");
  env.agent_store = variable("TORCHELASTIC_USE_AGENT_STORE");
  env.restart_count = variable("TORCHELASTIC_RESTART_COUNT");
  env.slurm_restart_count = variable("SLURM_RESTART_COUNT");
  env.resolved_batch = variable(gputrain::app::kResolvedBatchVariable);
  env.mlflow_tracking_uri = value_of("MLFLOW_TRACKING_URI");
  env.kernel_caches = {value_of("HOME"),
                       value_of("XDG_CACHE_HOME"),
                       value_of("PYTORCH_KERNEL_CACHE_PATH"),
                       value_of("USE_PYTORCH_KERNEL_CACHE"),
                       value_of("CUDA_CACHE_PATH"),
                       value_of("CUDA_CACHE_DISABLE")};
  for (char** entry = environ; *entry != nullptr; ++entry) env.all.emplace_back(*entry);
  return env;
}

std::string default_log_level() { return value_of("SPDLOG_LEVEL").value_or("info"); }

// The final error line reaches stderr whatever the log level: --log-level off
// silences the logs, not the reason the command failed.
void report_failure(spdlog::level::level_enum level, const std::string& message) {
  if (spdlog::default_logger()->should_log(level)) {
    spdlog::log(level, "{}", message);
  } else {
    std::cerr << "gputrain: " << message << std::endl;
  }
}

// The first word of argv that is not an option (or --log-level's value): the command the user meant.
std::string first_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--log-level") {
      ++i;
      continue;
    }
    if (!arg.empty() && arg[0] != '-') return arg;
  }
  return "";
}

// test's and predict's --tta: both score images the same way by default.
void add_tta_option(CLI::App* command, std::string& tta) {
  command
      ->add_option("--tta", tta,
                   "run: average the run's test-time views of each image (train.tta), as its evaluations did "
                   "(default); off: each image alone, as an exported model scores it")
      ->check(CLI::IsMember({"run", "off"}));
}

}  // namespace

CLI::Validator gputrain::app::whole_number(int64_t minimum, int64_t maximum) {
  return CLI::Validator(
      [minimum, maximum](std::string& text) -> std::string {
        int64_t value = 0;
        std::size_t used = 0;
        try {
          value = std::stoll(text, &used);
        } catch (const std::out_of_range&) {
          used = std::string::npos;
        } catch (const std::exception&) {
          return fmt::format("'{}' is not a number", text);
        }
        if (used != std::string::npos && used != text.size()) return fmt::format("'{}' is not a number", text);
        if (used == std::string::npos || value < minimum || value > maximum) {
          return fmt::format("must be a whole number from {} to {} (got {})", minimum, maximum, text);
        }
        return "";
      },
      fmt::format("INT in [{}, {}]", minimum, maximum));
}

void gputrain::app::add_config_options(CLI::App* command, ConfigFiles& config, std::vector<std::string>& overrides,
                                       bool required) {
  command
      ->add_option("-c,--config", config,
                   "experiment YAML file (see configs/); given again, a later file's keys over an earlier's")
      ->required(required);
  command
      ->add_option("--set", overrides,
                   "override one key with a YAML value, e.g. --set data.batch_size=64 --set gpus=[0,1]; "
                   "applied in order after the file")
      ->take_all();
}

int gputrain::app::run_cli(int argc, char** argv, const WriteHooks& checkpoint_write_hooks) {
  CheckedStandardOutput standard_output;
  CLI::App app{"gputrain: train neural networks on CPUs and GPUs from YAML experiment files"};
  app.set_version_flag("-V,--version", fmt::format("{}\ncommit {}", gputrain::device::version_line(), build_commit()),
                       "print gputrain's version and commit, and the LibTorch and CUDA versions");
  app.require_subcommand(1);
  app.fallthrough();  // global options such as --log-level also work after the subcommand
  std::string log_level = default_log_level();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off (default: $SPDLOG_LEVEL or info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));

  const Environment env = read_environment();
  // Every command once: its parser, and what runs it once it is parsed.
  struct Command {
    CLI::App* parser;
    std::function<int()> run;
  };
  std::vector<Command> commands;
  const auto command = [&commands](CLI::App* parser, std::function<int()> run) {
    commands.push_back({parser, std::move(run)});
    return parser;
  };

  ConfigArgs config_args;
  auto* config = command(app.add_subcommand("config", "validate an experiment file and print it fully resolved"),
                         [&] { return run_config(config_args); });
  add_config_options(config, config_args.config, config_args.overrides, /*required=*/false);
  config->add_flag("--keys", config_args.keys, "print every key (default, values, meaning) as a markdown table");
  config->add_flag("--explain", config_args.explain,
                   "print each key, its value and where it came from (file:line:col, --set #N, the checkpoint "
                   "or default)");
  config->add_option("--resume", config_args.resume,
                     "the config train --resume would continue with: 'auto' (with --config) or a checkpoint file; "
                     "its keys then come from the checkpoint, --set on top");

  ModelArgs model_args;
  auto* model = command(
      app.add_subcommand("model",
                         "print the configured model's layers: each output shape, parameter count and forward FLOPs "
                         "per sample"),
      [&] { return run_model(model_args); });
  add_config_options(model, model_args.config, model_args.overrides);

  PlanArgs plan_args;
  plan_args.env = env;
  command(add_plan_command(app, plan_args), [&] { return run_plan(plan_args); });

  InfoArgs info_args{false, env};
  auto* info = command(app.add_subcommand("info", "report LibTorch, CUDA, cuDNN, NCCL and the visible devices"),
                       [&] { return run_info(info_args); });
  info->add_flag("--json", info_args.json, "print the report as one JSON object");

  TrainArgs train_args;
  train_args.env = env;
  train_args.checkpoint_write_hooks = checkpoint_write_hooks;
  auto* train = app.add_subcommand("train", "train the model an experiment file describes, testing after every epoch");
  command(train, [&] {
    // An empty --resume (an unset shell variable) must not mean "start afresh".
    if (train->count("--resume") > 0 && train_args.resume.empty()) {
      throw UserError(
          "--resume: the value is empty; give 'auto' or a checkpoint file, or leave --resume "
          "out to start a new run");
    }
    if (train_args.max_restarts > 0 && !train_args.nproc) {
      throw UserError(
          "--max-restarts restarts the workers --nproc starts; add --nproc N (under torchrun, give torchrun "
          "--max-restarts)");
    }
    return run_train(train_args);
  });
  add_config_options(train, train_args.config, train_args.overrides, /*required=*/false);
  train->add_option("-o,--output", train_args.output,
                    "directory for runs (overrides output.dir); the run writes <output>/<name>/");
  train
      ->add_option("--nproc", train_args.nproc,
                   "start N worker processes on this machine, one per selected GPU (or N CPU workers with "
                   "device: cpu), and wait for them; torchrun and srun start workers instead")
      ->check(whole_number(1, 1024));
  train
      ->add_option("--max-restarts", train_args.max_restarts,
                   "with --nproc: when a worker fails, start every worker again, up to this many times (as "
                   "torchrun's --max-restarts); train.resume: auto continues from the newest intact checkpoint")
      ->check(whole_number(0, 1000));
  train->add_option("--resume", train_args.resume,
                    "continue from a checkpoint: 'auto' (the newest valid one of the run --config names) or a "
                    "checkpoint file; its config is restored, then --set applies");

  TestArgs test_args;
  test_args.env = env;
  auto* test = command(app.add_subcommand("test", "evaluate saved weights on the test split and print the test line"),
                       [&] { return run_test(test_args); });
  add_config_options(test, test_args.config, test_args.overrides, /*required=*/false);
  test->add_option("--checkpoint", test_args.checkpoint,
                   "weights written by train: a checkpoint file (which holds its config: --config is then "
                   "optional) or <run dir>/model.pt (with --config)")
      ->required();
  add_tta_option(test, test_args.tta);

  PredictArgs predict_args;
  predict_args.env = env;
  auto* predict = command(
      app.add_subcommand(
          "predict", "apply saved weights to your own samples (.npy, or .csv for `dataset: csv`): one CSV row each"),
      [&] { return run_predict(predict_args); });
  add_config_options(predict, predict_args.config, predict_args.overrides, /*required=*/false);
  predict
      ->add_option("--checkpoint", predict_args.checkpoint,
                   "a checkpoint file (which holds its config) or <run dir>/model.pt (with --config)")
      ->required();
  predict->add_option("--input", predict_args.input, "the samples: a .npy of inputs or a .csv of the table's columns")
      ->required();
  predict->add_option("--out", predict_args.out, "the CSV file to write (default: standard output)");
  predict->add_flag("--force", predict_args.force, "replace an existing --out file");
  add_tta_option(predict, predict_args.tta);

  ExportArgs export_args;
  export_args.write_hooks = checkpoint_write_hooks;  // an export is paused as a checkpoint write is
  auto* export_command =
      command(app.add_subcommand("export",
                                 "write a checkpoint's weights as a state_dict that Python's torch.load reads or as "
                                 "safetensors, or the model as ONNX or as a PyTorch module"),
              [&] { return run_export(export_args); });
  export_command
      ->add_option("--checkpoint", export_args.checkpoint,
                   "a checkpoint file, a model.pt, a state dict (torch.save) or a .safetensors file")
      ->required();
  export_command
      ->add_option("--out", export_args.out,
                   "the file to write, e.g. weights.pt, model.onnx, model.py or model.safetensors")
      ->required();
  export_command->add_flag("--force", export_args.force, "replace an existing --out file");
  export_command
      ->add_option("--weights", export_args.weights,
                   "live or ema (a checkpoint's train.ema average); default: the weights test and model.pt use")
      ->check(CLI::IsMember({"live", "ema"}));
  export_command
      ->add_option("--format", export_args.format,
                   "state_dict (the weights, for torch.load), onnx (the network and its weights, for ONNX "
                   "Runtime and others), pytorch (a .py defining the network as an nn.Module, and its state_dict "
                   "beside it as .pt) or safetensors (the weights, for model hubs and safetensors' readers)")
      ->check(CLI::IsMember({"state_dict", "onnx", "pytorch", "safetensors"}))
      ->capture_default_str();
  add_config_options(export_command, export_args.config, export_args.overrides, /*required=*/false);
  export_command->add_flag(
      "--normalize-inputs,!--no-normalize-inputs", export_args.normalize_inputs,
      "onnx, pytorch: the model begins with the data set's normalisation (data.normalize) and takes images in [0, 1] "
      "(default); --no-normalize-inputs leaves it to the caller");
  ConfigsArgs configs_args;
  command(add_configs_command(app, configs_args), [&] { return run_configs(configs_args); });
  DatasetsArgs datasets_args;
  datasets_args.mirror = value_of("GPUTRAIN_DATASETS_MIRROR");
  datasets_args.catalog = value_of("GPUTRAIN_DATASETS_CATALOG");
  datasets_args.ca_bundle = value_of("CURL_CA_BUNDLE");
  if (!datasets_args.ca_bundle) datasets_args.ca_bundle = value_of("SSL_CERT_FILE");
  command(add_datasets_command(app, datasets_args), [&] { return run_datasets(datasets_args); });
  BenchArgs bench_args;
  bench_args.env = env;
  command(add_bench_command(app, bench_args), [&] { return run_bench(bench_args); });
  SweepArgs sweep_args;
  auto* sweep = command(add_sweep_command(app, sweep_args), [&] { return run_sweep(sweep_args); });

  ReportArgs report_args;
  auto* report =
      command(app.add_subcommand("report", "write the HTML report of a run directory (also of an unfinished run)"),
              [&] { return run_report(report_args); });
  report->add_option("run_dir", report_args.run_dir, "the run directory (<output.dir>/<name>/)")->required();
  report->add_option("-o,--out", report_args.out, "the HTML file to write (default: RUN_DIR/report.html)");
  report->add_flag("--mlflow", report_args.mlflow,
                   "instead, send the MLflow server what the run could not (its mlflow-pending.jsonl)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const std::string word = first_word(argc, argv);
    std::vector<std::string> names;
    for (const Command& known : commands) names.push_back(known.parser->get_name());
    std::sort(names.begin(), names.end());
    if (!word.empty() && e.get_exit_code() != 0 && std::find(names.begin(), names.end(), word) == names.end()) {
      std::cerr << fmt::format("gputrain: unknown command '{}'; the commands are: {}. See gputrain --help\n", word,
                               fmt::join(names, ", "));
      return static_cast<int>(ExitCode::kUserInput);
    }
    const int code = app.exit(e);  // prints help, version or the usage error
    return code == 0 ? 0 : static_cast<int>(ExitCode::kUserInput);
  }

  install_console_logging(log_level);
  train_args.log_level = log_level;
  sweep_args.log_level = log_level;
  const auto run_command = [&]() -> int {
    if (!train->parsed() && !sweep->parsed()) restore_hangup_action();  // the others have no checkpoint to ask for
    for (const Command& parsed : commands) {
      if (parsed.parser->parsed()) return parsed.run();
    }
    return 0;
  };
  try {
    const int code = run_command();
    if (code == 0) standard_output.finish();
    return code;
  } catch (const Error& e) {
    report_failure(spdlog::level::err, e.what());
    return static_cast<int>(e.code());
  } catch (const c10::Error& e) {
    report_failure(spdlog::level::err, fmt::format("LibTorch error: {}", e.what_without_backtrace()));
    return static_cast<int>(ExitCode::kRuntime);
  } catch (const std::exception& e) {
    report_failure(spdlog::level::critical, fmt::format("internal error: {}", e.what()));
    return static_cast<int>(ExitCode::kRuntime);
  }
}

#pragma once
// The experiment file as plain aggregates: one struct per YAML section, one
// field per key, named exactly as the key. Defaults here are the defaults a
// user gets; `gputrain config` prints them all. No torch, no YAML here.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/config/choices.h"
#include "gputrain/config/source_map.h"

namespace gputrain::config {

// A switch that may also be left to gputrain's rule (documented per key);
// written true, false or auto.
enum class Switch { kOff, kOn, kAuto };

// The choice keys' values. Each enum's table (below) holds its words.
enum class DatasetName { kRandom, kSynthetic, kCifar10, kFashionMnist, kMnist, kNpy, kCsv, kImageFolder };
enum class ImageCache { kAuto, kMemory, kNone };
enum class ImageDecode { kAuto, kCpu, kGpu };
enum class ModelName { kLinear, kMlp, kCifar10Cnn, kLayers };
enum class Activation { kRelu, kGelu, kTanh };
enum class OptimizerName { kSgd, kAdam, kAdamW };
enum class SchedulerName { kNone, kStep, kCosine, kOneCycle, kLinearWarmupDecay };
enum class LossName { kAuto, kCrossEntropy, kMse };
enum class AmpMode { kOff, kFp16, kBf16 };
enum class OnNan { kStop, kSkip };
enum class OnSigint { kCheckpoint, kStop, kNone };
enum class MatmulPrecision { kAuto, kHighest, kHigh, kMedium };
enum class StrategyName { kAuto, kSingle, kDp, kDdp };
enum class DdpBackend { kAuto, kNccl, kGloo };
enum class StopMetric { kAuto, kAccuracy, kLoss };
enum class FrozenBatchnorm { kEval, kTrain };
enum class LayerType {
  kConv2d,
  kBatchnorm,
  kLayernorm,
  kRelu,
  kGelu,
  kSilu,
  kTanh,
  kLeakyRelu,
  kMaxpool,
  kAvgpool,
  kAdaptiveAvgpool,
  kFlatten,
  kLinear,
  kDropout,
  kResidual,
  kSequential,
  kPatchEmbedding,
  kClassToken,
  kPositionEmbedding,
  kSelfAttention,
  kToken
};

inline constexpr ChoiceTable<DatasetName, 8> kDatasetNames{{{{"random", DatasetName::kRandom},
                                                             {"synthetic", DatasetName::kSynthetic},
                                                             {"cifar10", DatasetName::kCifar10},
                                                             {"fashion_mnist", DatasetName::kFashionMnist},
                                                             {"mnist", DatasetName::kMnist},
                                                             {"npy", DatasetName::kNpy},
                                                             {"csv", DatasetName::kCsv},
                                                             {"image_folder", DatasetName::kImageFolder}}}};
inline constexpr ChoiceTable<ImageCache, 3> kImageCaches{
    {{{"auto", ImageCache::kAuto}, {"memory", ImageCache::kMemory}, {"none", ImageCache::kNone}}}};
inline constexpr ChoiceTable<ImageDecode, 3> kImageDecodes{
    {{{"auto", ImageDecode::kAuto}, {"cpu", ImageDecode::kCpu}, {"gpu", ImageDecode::kGpu}}}};
inline constexpr ChoiceTable<ModelName, 4> kModelNames{{{{"linear", ModelName::kLinear},
                                                         {"mlp", ModelName::kMlp},
                                                         {"cifar10_cnn", ModelName::kCifar10Cnn},
                                                         {"layers", ModelName::kLayers}}}};
inline constexpr ChoiceTable<Activation, 3> kActivations{
    {{{"relu", Activation::kRelu}, {"gelu", Activation::kGelu}, {"tanh", Activation::kTanh}}}};
inline constexpr ChoiceTable<OptimizerName, 3> kOptimizerNames{
    {{{"sgd", OptimizerName::kSgd}, {"adam", OptimizerName::kAdam}, {"adamw", OptimizerName::kAdamW}}}};
inline constexpr ChoiceTable<SchedulerName, 5> kSchedulerNames{
    {{{"none", SchedulerName::kNone},
      {"step", SchedulerName::kStep},
      {"cosine", SchedulerName::kCosine},
      {"onecycle", SchedulerName::kOneCycle},
      {"linear_warmup_decay", SchedulerName::kLinearWarmupDecay}}}};
inline constexpr ChoiceTable<LossName, 3> kLossNames{
    {{{"auto", LossName::kAuto}, {"cross_entropy", LossName::kCrossEntropy}, {"mse", LossName::kMse}}}};
inline constexpr ChoiceTable<AmpMode, 3> kAmpModes{
    {{{"off", AmpMode::kOff}, {"fp16", AmpMode::kFp16}, {"bf16", AmpMode::kBf16}}}};
inline constexpr ChoiceTable<OnNan, 2> kOnNan{{{{"stop", OnNan::kStop}, {"skip", OnNan::kSkip}}}};
inline constexpr ChoiceTable<OnSigint, 3> kOnSigint{
    {{{"checkpoint", OnSigint::kCheckpoint}, {"stop", OnSigint::kStop}, {"none", OnSigint::kNone}}}};
inline constexpr ChoiceTable<MatmulPrecision, 4> kMatmulPrecisions{{{{"auto", MatmulPrecision::kAuto},
                                                                     {"highest", MatmulPrecision::kHighest},
                                                                     {"high", MatmulPrecision::kHigh},
                                                                     {"medium", MatmulPrecision::kMedium}}}};
inline constexpr ChoiceTable<StrategyName, 4> kStrategyNames{{{{"auto", StrategyName::kAuto},
                                                               {"single", StrategyName::kSingle},
                                                               {"dp", StrategyName::kDp},
                                                               {"ddp", StrategyName::kDdp}}}};
inline constexpr ChoiceTable<DdpBackend, 3> kDdpBackends{
    {{{"auto", DdpBackend::kAuto}, {"nccl", DdpBackend::kNccl}, {"gloo", DdpBackend::kGloo}}}};
inline constexpr ChoiceTable<StopMetric, 3> kStopMetrics{
    {{{"auto", StopMetric::kAuto}, {"accuracy", StopMetric::kAccuracy}, {"loss", StopMetric::kLoss}}}};
inline constexpr ChoiceTable<FrozenBatchnorm, 2> kFrozenBatchnorms{
    {{{"eval", FrozenBatchnorm::kEval}, {"train", FrozenBatchnorm::kTrain}}}};
inline constexpr ChoiceTable<LayerType, 21> kLayerTypes{{{{"conv2d", LayerType::kConv2d},
                                                          {"batchnorm", LayerType::kBatchnorm},
                                                          {"layernorm", LayerType::kLayernorm},
                                                          {"relu", LayerType::kRelu},
                                                          {"gelu", LayerType::kGelu},
                                                          {"silu", LayerType::kSilu},
                                                          {"tanh", LayerType::kTanh},
                                                          {"leaky_relu", LayerType::kLeakyRelu},
                                                          {"maxpool", LayerType::kMaxpool},
                                                          {"avgpool", LayerType::kAvgpool},
                                                          {"adaptive_avgpool", LayerType::kAdaptiveAvgpool},
                                                          {"flatten", LayerType::kFlatten},
                                                          {"linear", LayerType::kLinear},
                                                          {"dropout", LayerType::kDropout},
                                                          {"residual", LayerType::kResidual},
                                                          {"sequential", LayerType::kSequential},
                                                          {"patch_embedding", LayerType::kPatchEmbedding},
                                                          {"class_token", LayerType::kClassToken},
                                                          {"position_embedding", LayerType::kPositionEmbedding},
                                                          {"self_attention", LayerType::kSelfAttention},
                                                          {"token", LayerType::kToken}}}};

// The table of each choice enum, found by overload (config::word(value) uses it).
constexpr const auto& choices(DatasetName) { return kDatasetNames; }
constexpr const auto& choices(ImageCache) { return kImageCaches; }
constexpr const auto& choices(ImageDecode) { return kImageDecodes; }
constexpr const auto& choices(ModelName) { return kModelNames; }
constexpr const auto& choices(Activation) { return kActivations; }
constexpr const auto& choices(OptimizerName) { return kOptimizerNames; }
constexpr const auto& choices(SchedulerName) { return kSchedulerNames; }
constexpr const auto& choices(LossName) { return kLossNames; }
constexpr const auto& choices(AmpMode) { return kAmpModes; }
constexpr const auto& choices(OnNan) { return kOnNan; }
constexpr const auto& choices(OnSigint) { return kOnSigint; }
constexpr const auto& choices(MatmulPrecision) { return kMatmulPrecisions; }
constexpr const auto& choices(StrategyName) { return kStrategyNames; }
constexpr const auto& choices(DdpBackend) { return kDdpBackends; }
constexpr const auto& choices(StopMetric) { return kStopMetrics; }
constexpr const auto& choices(FrozenBatchnorm) { return kFrozenBatchnorms; }
constexpr const auto& choices(LayerType) { return kLayerTypes; }

struct NormalizeConfig {
  std::vector<double> mean;  // empty: no normalisation; else one value or one per channel
  std::vector<double> std;
};

// torchvision's RandomResizedCrop: a box of a random share of the area and
// aspect ratio, resized to size x size (training only).
struct ResizedCropConfig {
  int64_t size = 0;  // 0 = off
  std::vector<double> scale{0.08, 1.0};
  std::vector<double> ratio{3.0 / 4.0, 4.0 / 3.0};
};

// torchvision's ColorJitter: each factor's range; 0 = that op off.
struct ColorJitterConfig {
  double brightness = 0.0;
  double contrast = 0.0;
  double saturation = 0.0;
  double hue = 0.0;
};

struct AugmentConfig {
  int64_t random_crop = 0;  // padding in pixels; 0 = off
  bool reflect = false;     // the padding mirrors the image's edge instead of zeros
  bool hflip = false;
  bool alternating_flip = false;  // hflip mirrors each image in every other epoch (airbench)
  ResizedCropConfig random_resized_crop;
  ColorJitterConfig color_jitter;
};

// Batch semantics: batch_size is the number of samples per optimizer step
// across all replicas; each micro-batch is batch_size / train.accumulation_steps
// and the replicas share it (PyTorch's scatter rule for uneven splits).
// micro_batch_size states it the other way (the tutorials' loader batch): the
// samples of one forward pass in each process; batch_size is then auto (unset,
// whether left out or written so) and comes to micro_batch_size x
// accumulation_steps x processes. batch_size auto without micro_batch_size is
// train.target_batch, the micro-batch and the accumulation measured. Either
// way the plan resolves the numbers (plan::BatchPlan); the config keeps what
// was written.
struct DataConfig {
  DatasetName dataset = DatasetName::kCifar10;
  std::string root;           // resolved per dataset when empty
  std::string target_column;  // csv: the target's column name; empty: the last column
  // image_folder: root/train/<class>/*.png|jpg|jpeg and the test split's folders
  std::string test_root;  // empty: root/test
  // [size] or [height, width]: every image resized to it; [] or [0]: as stored (all alike)
  std::vector<int64_t> image_size;
  // torchvision's Resize(n) (shorter side to n) then CenterCrop: the test split's
  // (and the training split's without augment.random_resized_crop); 0 / []: off
  int64_t resize = 0;
  std::vector<int64_t> center_crop;
  // An image that cannot be read is logged and left out, not an error.
  bool skip_bad_images = false;
  int64_t channels = 0;  // 1 (grey) or 3 (RGB); 0: 1 when every image is grey, else 3
  // Images stored larger than this are refused before decoding (decompression bombs); PIL's default.
  int64_t max_image_pixels = 89478485;
  ImageCache cache = ImageCache::kAuto;  // decoded images kept in memory, or decoded per batch
  // Under cache none: JPEGs decoded by the loader's threads (cpu) or by nvJPEG on the GPU (gpu);
  // auto: gpu when it can run (plan/run_plan.h).
  ImageDecode decode = ImageDecode::kAuto;
  std::optional<int64_t> batch_size = 128;
  std::optional<int64_t> micro_batch_size;
  int64_t test_batch_size = 0;  // 0: same as batch_size
  int64_t num_workers = 4;
  int64_t prefetch = 0;        // batches queued ahead; 0: 2 x num_workers
  int64_t decode_threads = 0;  // threads decoding and augmenting images, shared by the workers; 0: auto
  bool pin_memory = true;
  bool shuffle = true;
  bool drop_last = false;
  // The whole split resident on the training device (images as uint8), batches
  // gathered, augmented and normalised there: no host loader in the loop.
  // auto: on the CPU; on CUDA when the split takes at most half the GPU's free memory.
  Switch device_cache = Switch::kAuto;
  NormalizeConfig normalize;
  AugmentConfig augment;
  // random: the data-parallel demo's unlabeled RandomDataset
  int64_t length = 100;
  int64_t input_size = 5;
  // synthetic: seeded standard-normal inputs with random labels
  int64_t samples = 1000;
  int64_t test_samples = 200;
  int64_t features = 20;
  int64_t classes = 2;
  int64_t targets = 0;  // > 0: a regression task with this many real-valued targets
  // Only the samples of these classes, relabelled 0..n-1 in this order; empty: every class.
  std::vector<int64_t> keep_classes;
};

// One entry of model.layers. Each type's keys, their kinds, ranges and
// defaults are declared once in config/layer_keys.h; `values` holds those the
// file gives (integers and booleans as numbers), so a dump writes back only them.
struct LayerConfig {
  LayerType type = LayerType::kRelu;
  std::string name;  // "": the type's prefix and a count (conv1, fc2, ...)
  std::map<std::string, double> values;
  std::vector<LayerConfig> layers;    // residual: the branch whose output is added to its input; sequential: its layers
  std::vector<LayerConfig> shortcut;  // residual: what the input passes through first; empty: nothing
  // Where it was declared ("model.layers[4].layers[1]" and its file position), for errors about its shape.
  std::string path;
  SourceMark mark;
};
// Same declaration: type, name, values and nested layers; not where it was read.
bool operator==(const LayerConfig& a, const LayerConfig& b);
inline bool operator!=(const LayerConfig& a, const LayerConfig& b) { return !(a == b); }

struct ModelConfig {
  ModelName name = ModelName::kCifar10Cnn;
  std::vector<LayerConfig> layers;      // name: layers
  std::optional<int64_t> in_features;   // unset: from the data set
  std::optional<int64_t> out_features;  // unset: from the data set
  std::vector<int64_t> hidden{64};
  Activation activation = Activation::kRelu;
  double dropout = 0.0;
  // ddp: batchnorm layers normalise with the global batch's statistics (all-reduced), not each rank's.
  bool sync_batchnorm = false;
  // Fine-tuning (plan/model_init.h): weights to start from, matched by name and shape.
  std::string init_from;              // "": the layers' own initialisation
  bool init_strict = false;           // a tensor that does not fit is an error, not skipped
  std::vector<std::string> init_map;  // "from=to": a file's names starting with `from` start with `to` instead
  std::vector<std::string> freeze;    // parameter name prefixes that do not train
  int64_t freeze_epochs = 0;          // > 0: model.freeze holds for the first this many epochs only
  double unfreeze_lr_multiplier = 1;  // after freeze_epochs: the frozen parameters' lr is the schedule's × this
  FrozenBatchnorm freeze_batchnorm = FrozenBatchnorm::kEval;
};

// optim.muon: Muon (momentum, then Newton–Schulz orthogonalisation of the
// update) for the trained 4-D convolution weights; the other parameters
// follow optim.name (sgd, adam or adamw). optim/muon.h has the arithmetic.
struct MuonConfig {
  double lr = 0.0;  // 0 = off
  double momentum = 0.6;
  bool nesterov = true;
  int64_t steps = 3;  // Newton–Schulz iterations
};

// optim.lookahead (Zhang et al. 2019, as airbench94 uses it): slow weights
// that every k optimizer steps move alpha of the way to the fast ones, which
// then restart from them. train/lookahead.h has the arithmetic.
struct LookaheadConfig {
  int64_t k = 0;  // optimizer steps between syncs; 0 = off
  double alpha = 0.5;
};

struct OptimConfig {
  OptimizerName name = OptimizerName::kSgd;
  double lr = 0.01;
  double momentum = 0.0;
  double weight_decay = 0.0;
  // Parameter groups (optim/optimizer.h has the rules): no weight decay on
  // tensors of dim <= 1, and the lr of parameters named *bias scaled.
  bool no_decay_bias_norm = false;
  double bias_lr_multiplier = 1.0;
  bool nesterov = false;
  std::vector<double> betas{0.9, 0.999};
  double eps = 1e-8;
  SchedulerName scheduler = SchedulerName::kNone;
  int64_t step_size = 1;     // step: epochs between decays
  double gamma = 0.1;        // step: decay factor
  int64_t warmup_steps = 0;  // linear warm-up before the schedule
  // linear_warmup_decay: its rise and its fall, as fractions of the run's optimizer steps.
  double warmup_fraction = 0.0;
  double cooldown_fraction = 0.0;
  // How the step runs, as PyTorch's foreach= and fused= (at most one): a few
  // multi-tensor kernels over all parameters instead of a loop of small ops
  // per parameter. Same update, same state in checkpoints. auto: fused unless foreach.
  bool foreach = false;
  Switch fused = Switch::kAuto;
  MuonConfig muon;
  LookaheadConfig lookahead;
};

// An exponential moving average of the weights, evaluated and saved in their place.
struct EmaConfig {
  double decay = 0.0;       // average = decay * average + (1 - decay) * weights; 0 = off
  int64_t start_epoch = 1;  // the first epoch whose steps update it
  int64_t every = 1;        // optimizer steps between updates
};

// Test-time augmentation: the logits of each view, averaged.
struct TtaConfig {
  bool hflip = false;     // also the mirrored image
  int64_t translate = 0;  // also the image shifted by this many pixels in each of the four directions
};

struct EarlyStoppingConfig {
  int64_t patience = 0;  // evaluations without improvement before stopping; 0 = off
  double min_delta = 0.0;
  StopMetric metric = StopMetric::kAuto;
  bool restore_best = false;
};

// train.resume: where a run starts when `train --resume` is not given.
struct ResumeFrom {
  enum class Kind { kAuto, kNever, kCheckpoint };
  Kind kind = Kind::kAuto;
  std::string checkpoint;  // kCheckpoint: the file to continue from
};

// train.max_memory: the memory budget of data.batch_size auto.
struct MemoryBudget {
  std::optional<int64_t> bytes;  // unset: auto
};

// train.profile: LibTorch's profiler over a few steps of one epoch (train/profile.h).
struct ProfileConfig {
  int64_t epoch = 0;  // the epoch whose first steps are recorded; 0 = off
  int64_t steps = 5;
};

struct TrainConfig {
  int64_t epochs = 10;
  LossName loss = LossName::kAuto;
  AmpMode amp = AmpMode::kOff;
  int64_t accumulation_steps = 1;
  // With data.batch_size auto: the global batch per optimizer step to reach; 0: none.
  int64_t target_batch = 0;
  MemoryBudget max_memory;
  double grad_clip = 0.0;  // max global L2 norm; 0 = off
  int64_t log_every = 50;
  bool log_replicas = false;
  // Cross-entropy weight per class (PyTorch's CrossEntropyLoss(weight=...)); empty: all 1.
  std::vector<double> class_weights;
  double label_smoothing = 0.0;  // cross-entropy targets 1 - e on the class, e / C on every class
  int64_t eval_every = 1;        // epochs between evaluations of the test split
  int64_t eval_every_steps = 0;  // optimizer steps between evaluations; 0 = off
  double target_accuracy = 0.0;  // stop once the test accuracy reaches it; 0 = off
  EarlyStoppingConfig early_stopping;
  EmaConfig ema;
  TtaConfig tta;
  OnNan on_nan = OnNan::kStop;
  OnSigint on_sigint = OnSigint::kCheckpoint;
  ResumeFrom resume;  // checkpoint/resume.h
  // Fast paths; each auto rule is in plan/fast_paths.h, and each falls back,
  // with a log line, where it cannot apply.
  Switch cuda_graph = Switch::kAuto;       // capture the whole train step once, replay it (CUDA)
  Switch channels_last = Switch::kAuto;    // model and 4-D inputs in channels-last memory format
  Switch cudnn_benchmark = Switch::kAuto;  // let cuDNN time its algorithms for the shapes it sees
  // CPU intra-op threads; 0: LibTorch's default (one per physical core); unset: auto.
  std::optional<int64_t> threads;
  // float32 matmuls: highest (full fp32), high (TF32 on CUDA), medium (bf16);
  // auto: high on CUDA (as cuDNN's convolutions already are), highest elsewhere.
  MatmulPrecision matmul_precision = MatmulPrecision::kAuto;
  bool tensorboard = true;   // event files in the run directory
  int64_t monitor_ms = 500;  // NVML sampling period on CUDA; 0 = off
  ProfileConfig profile;
};

struct DpConfig {
  int64_t replicas = 0;  // 0: one per selected GPU; with device: cpu, CPU threads
};

struct DdpConfig {
  DdpBackend backend = DdpBackend::kAuto;
  int64_t timeout_s = 300;
  double bucket_cap_mb = 25;             // PyTorch DDP's bucket_cap_mb
  bool gradient_as_bucket_view = false;  // PyTorch DDP's gradient_as_bucket_view
};

struct CheckpointConfig {
  std::string dir = "checkpoints";  // relative to the run directory
  int64_t every = 1;                // epochs; 0 = off
  int64_t every_steps = 0;          // 0 = off
  int64_t keep = 3;
};

struct OutputConfig {
  std::string dir = "runs";  // a run writes <dir>/<name>/
};

// tracking.mlflow: the run logged to an MLflow tracking server (report/mlflow.h).
struct MlflowConfig {
  std::string uri;  // http(s)://host:port; "": MLFLOW_TRACKING_URI, else no tracking
  std::string experiment = "Default";
  std::string run_name;  // "": the config's name
  std::map<std::string, std::string> tags;
};

struct TrackingConfig {
  MlflowConfig mlflow;
};

// `device:` as parsed from its text: auto | cpu | cuda | cuda:N | mps.
enum class DeviceKind { kAuto, kCpu, kCuda, kMps };
struct DeviceRequest {
  DeviceKind kind = DeviceKind::kAuto;
  std::optional<int64_t> index;  // cuda:N

  // "auto", "cpu", "cuda", "cuda:1", "mps"; nullopt for other text.
  static std::optional<DeviceRequest> parse(const std::string& text);
  std::string text() const;  // as written in the file
};

// `gpus: all` or an explicit list of logical indices (after CUDA_VISIBLE_DEVICES).
struct GpuSelection {
  bool all = true;
  std::vector<int64_t> indices;
};

struct ExperimentConfig {
  std::string name = "experiment";
  uint64_t seed = 0;
  DeviceRequest device;
  GpuSelection gpus;
  StrategyName strategy = StrategyName::kAuto;
  DataConfig data;
  ModelConfig model;
  OptimConfig optim;
  TrainConfig train;
  DpConfig dp;
  DdpConfig ddp;
  CheckpointConfig checkpoint;
  OutputConfig output;
  TrackingConfig tracking;
};

// A loaded config with the origin of every key, for later errors that must
// point into the file (a GPU index that is not there, say).
struct LoadedConfig {
  ExperimentConfig config;
  SourceMap sources;
};

// Where a data set lives when data.root is not given.
std::string default_data_root(DatasetName dataset);

}  // namespace gputrain::config

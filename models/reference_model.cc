#include "models/reference_model.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "models/cnn.h"
#include "models/named_model.h"
#include "models/rng.h"
#include "models/samples.h"
#include "models/train_checks.h"

namespace fedsched {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMat>;
using ConstMatMap = Eigen::Map<const RowMat>;
using VecMap = Eigen::Map<Eigen::RowVectorXf>;
using ConstVecMap = Eigen::Map<const Eigen::RowVectorXf>;

constexpr int kEvalBatch = 1024;

// One dense layer of an architecture: kernel [in, out], bias [out].
struct LayerSpec {
  std::string kernel_name;
  std::string bias_name;
  int in = 0;
  int out = 0;
};

// Dense layers in order; ReLU between consecutive layers, softmax after the last.
std::vector<LayerSpec> LayersOf(const v1::ModelConfig& resolved) {
  if (resolved.architecture() == "softmax") {
    return {{"dense/kernel", "dense/bias", kReferenceInputSize, kNumClasses}};
  }
  const int h = resolved.hidden_units();
  return {{"dense1/kernel", "dense1/bias", kReferenceInputSize, h},
          {"dense2/kernel", "dense2/bias", h, kNumClasses}};
}

std::string Describe(const v1::ModelConfig& resolved) {
  if (resolved.architecture() == "softmax") return "architecture softmax";
  if (resolved.architecture() == kCnnArchitecture) return "architecture cnn";
  return absl::StrCat("architecture mlp, hidden_units ", resolved.hidden_units());
}

// Positions in Model::tensors of each layer's kernel and bias, after validating names and shapes.
struct TensorIndex {
  std::vector<int> kernel;
  std::vector<int> bias;
};

absl::Status CheckTensor(const v1::Tensor& t, std::vector<int64_t> want_shape,
                         const v1::ModelConfig& resolved) {
  const std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  if (shape != want_shape) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model tensor \"%s\" has shape [%s], want [%s] (%s)", t.name(), absl::StrJoin(shape, ","),
        absl::StrJoin(want_shape, ","), Describe(resolved)));
  }
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  if (t.data_size() != elements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model tensor \"%s\" has %d values, but its shape [%s] needs %d", t.name(),
                        t.data_size(), absl::StrJoin(shape, ","), elements));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorIndex> IndexTensors(const v1::ModelConfig& resolved,
                                         const std::vector<LayerSpec>& layers,
                                         const v1::Model& model) {
  TensorIndex index;
  index.kernel.assign(layers.size(), -1);
  index.bias.assign(layers.size(), -1);
  for (int i = 0; i < model.tensors_size(); ++i) {
    const v1::Tensor& t = model.tensors(i);
    int* slot = nullptr;
    std::vector<int64_t> want_shape;
    for (size_t l = 0; l < layers.size() && slot == nullptr; ++l) {
      if (t.name() == layers[l].kernel_name) {
        slot = &index.kernel[l];
        want_shape = {layers[l].in, layers[l].out};
      } else if (t.name() == layers[l].bias_name) {
        slot = &index.bias[l];
        want_shape = {layers[l].out};
      }
    }
    if (slot == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("model has unexpected tensor \"%s\" (%s)", t.name(), Describe(resolved)));
    }
    if (*slot >= 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("model tensor \"%s\" appears more than once", t.name()));
    }
    FEDSCHED_RETURN_IF_ERROR(CheckTensor(t, std::move(want_shape), resolved));
    *slot = i;
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    for (auto [pos, name] : {std::pair(index.kernel[l], &layers[l].kernel_name),
                             std::pair(index.bias[l], &layers[l].bias_name)}) {
      if (pos < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("model has no tensor \"%s\" (%s)", *name, Describe(resolved)));
      }
    }
  }
  return index;
}

// Scratch space and the forward / backward passes of one network. Weight pointers alias the
// proto RepeatedField<float> storage (no copies).
class Network {
 public:
  explicit Network(std::vector<LayerSpec> layers) : layers_(std::move(layers)) {
    acts_.resize(layers_.size());
  }

  const std::vector<LayerSpec>& layers() const { return layers_; }

  // Binds the weights Forward reads (kernels[l]: [in, out] row-major, biases[l]: [out]).
  void Bind(std::vector<const float*> kernels, std::vector<const float*> biases) {
    kernels_ = std::move(kernels);
    biases_ = std::move(biases);
  }

  // Logits of `rows` inputs at `x` ([rows, 784] row-major); valid until the next call.
  RowMat& Forward(const float* x, int rows) {
    ConstMatMap input(x, rows, kReferenceInputSize);
    for (size_t l = 0; l < layers_.size(); ++l) {
      const LayerSpec& spec = layers_[l];
      ConstMatMap kernel(kernels_[l], spec.in, spec.out);
      RowMat& out = acts_[l];
      out.resize(rows, spec.out);
      if (l == 0) {
        out.noalias() = input * kernel;
      } else {
        out.noalias() = acts_[l - 1] * kernel;
      }
      out.rowwise() += ConstVecMap(biases_[l], spec.out);
      if (l + 1 < layers_.size()) out = out.cwiseMax(0.0f);
    }
    return acts_.back();
  }

  // Turns the logits of the last Forward into softmax probabilities in place and writes each
  // row's cross-entropy against `labels` to `losses` ([rows]).
  void SoftmaxCrossEntropy(const int* labels, float* losses) {
    RowMat& logits = acts_.back();
    for (Eigen::Index i = 0; i < logits.rows(); ++i) {
      auto row = logits.row(i);
      const float max = row.maxCoeff();
      const float shifted_label_logit = row(labels[i]) - max;
      row = (row.array() - max).exp();
      const float sum = row.sum();
      losses[i] = std::log(sum) - shifted_label_logit;
      row /= sum;
    }
  }

  // After Forward + SoftmaxCrossEntropy on input `x`: one SGD step on the batch-mean loss,
  // with the FedProx pull toward `global_kernels` / `global_biases` when mu > 0. `kernels` and
  // `biases` are writable pointers to the weights passed to Bind.
  void BackwardAndStep(const float* x, const int* labels, float lr, float mu,
                       const std::vector<float*>& kernels, const std::vector<float*>& biases,
                       const std::vector<const float*>& global_kernels,
                       const std::vector<const float*>& global_biases) {
    const Eigen::Index rows = acts_.back().rows();
    // dLoss/dlogits of the batch mean: (softmax - one_hot) / rows.
    grad_ = acts_.back();
    for (Eigen::Index i = 0; i < rows; ++i) grad_(i, labels[i]) -= 1.0f;
    grad_ *= 1.0f / static_cast<float>(rows);

    ConstMatMap input(x, rows, kReferenceInputSize);
    for (size_t l = layers_.size(); l-- > 0;) {
      const LayerSpec& spec = layers_[l];
      MatMap kernel(kernels[l], spec.in, spec.out);
      VecMap bias(biases[l], spec.out);
      if (l > 0) {
        // Back-propagate through this layer's (pre-step) kernel and the ReLU of the layer below.
        grad_prev_.noalias() = grad_ * kernel.transpose();
        grad_prev_.array() *= (acts_[l - 1].array() > 0.0f).cast<float>();
      }
      if (mu > 0.0f) {
        // w <- w - lr * mu * (w - w_global), applied with the pre-step w like the gradient.
        const float pull = lr * mu;
        kernel += pull * (ConstMatMap(global_kernels[l], spec.in, spec.out) - kernel);
        bias += pull * (ConstVecMap(global_biases[l], spec.out) - bias);
      }
      if (l == 0) {
        kernel.noalias() -= (lr * input.transpose()) * grad_;
      } else {
        kernel.noalias() -= (lr * acts_[l - 1].transpose()) * grad_;
      }
      bias.noalias() -= lr * grad_.colwise().sum();
      if (l > 0) std::swap(grad_, grad_prev_);
    }
  }

 private:
  std::vector<LayerSpec> layers_;
  std::vector<const float*> kernels_;
  std::vector<const float*> biases_;
  std::vector<RowMat> acts_;  // acts_[l]: output of layer l (after ReLU; logits for the last)
  RowMat grad_;
  RowMat grad_prev_;
};

// Pointers to the weights of `model` in layer order (mutable or not, following Model's constness).
template <typename ModelT, typename Ptr>
void PointersOf(ModelT& model, const TensorIndex& index, std::vector<Ptr>* kernels,
                std::vector<Ptr>* biases) {
  kernels->clear();
  biases->clear();
  for (size_t l = 0; l < index.kernel.size(); ++l) {
    if constexpr (std::is_const_v<ModelT>) {
      kernels->push_back(model.tensors(index.kernel[l]).data().data());
      biases->push_back(model.tensors(index.bias[l]).data().data());
    } else {
      kernels->push_back(model.mutable_tensors(index.kernel[l])->mutable_data()->mutable_data());
      biases->push_back(model.mutable_tensors(index.bias[l])->mutable_data()->mutable_data());
    }
  }
}

}  // namespace

absl::StatusOr<v1::ModelConfig> ResolveModelConfig(const v1::ModelConfig& config) {
  v1::ModelConfig resolved = config;
  if (resolved.architecture().empty()) resolved.set_architecture("mlp");
  if (resolved.architecture() != "mlp" && resolved.architecture() != "softmax" &&
      resolved.architecture() != kCnnArchitecture) {
    return absl::InvalidArgumentError(absl::StrCat("ModelConfig.architecture \"",
                                                   resolved.architecture(),
                                                   "\" is unknown; use \"mlp\", \"softmax\" or "
                                                   "\"cnn\""));
  }
  if (resolved.hidden_units() < 0 || resolved.hidden_units() > kMaxHiddenUnits) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ModelConfig.hidden_units %d is outside [0, %d] (0 = default 128)",
                        resolved.hidden_units(), kMaxHiddenUnits));
  }
  if (resolved.hidden_units() == 0) resolved.set_hidden_units(128);
  if (resolved.init_seed() == 0) resolved.set_init_seed(1);
  return resolved;
}

absl::StatusOr<v1::Model> InitialModel(const v1::ModelConfig& config) {
  if (!config.initial_weights_path().empty()) {
    FEDSCHED_ASSIGN_OR_RETURN(v1::Model model, LoadModelFile(config.initial_weights_path()));
    if (!config.architecture().empty()) {
      if (absl::Status s = ValidateModel(config, model); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("model file ", config.initial_weights_path(),
                                                       " is not a \"", config.architecture(),
                                                       "\" model: ", s.message()));
      }
    }
    return model;
  }
  FEDSCHED_ASSIGN_OR_RETURN(v1::ModelConfig resolved, ResolveModelConfig(config));
  if (resolved.architecture() == kCnnArchitecture) return CnnInitialModel(resolved.init_seed());
  const std::vector<LayerSpec> layers = LayersOf(resolved);
  Rng rng(resolved.init_seed());
  v1::Model model;
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerSpec& spec = layers[l];
    const bool relu_follows = l + 1 < layers.size();
    v1::Tensor* kernel = model.add_tensors();
    kernel->set_name(spec.kernel_name);
    kernel->add_shape(spec.in);
    kernel->add_shape(spec.out);
    kernel->mutable_data()->Resize(spec.in * spec.out, 0.0f);
    float* w = kernel->mutable_data()->mutable_data();
    if (relu_follows) {
      const double stddev = std::sqrt(2.0 / spec.in);
      for (int i = 0; i < spec.in * spec.out; ++i) w[i] = static_cast<float>(stddev * rng.Normal());
    } else {
      const double limit = std::sqrt(6.0 / (spec.in + spec.out));
      for (int i = 0; i < spec.in * spec.out; ++i) {
        w[i] = static_cast<float>(limit * (2.0 * rng.Uniform() - 1.0));
      }
    }
    v1::Tensor* bias = model.add_tensors();
    bias->set_name(spec.bias_name);
    bias->add_shape(spec.out);
    bias->mutable_data()->Resize(spec.out, 0.0f);
  }
  return model;
}

absl::Status ValidateModel(const v1::ModelConfig& config, const v1::Model& model) {
  FEDSCHED_ASSIGN_OR_RETURN(v1::ModelConfig resolved, ResolveModelConfig(config));
  if (resolved.architecture() == kCnnArchitecture) return ValidateCnnModel(model);
  return IndexTensors(resolved, LayersOf(resolved), model).status();
}

absl::StatusOr<EvalResult> Evaluate(const v1::ModelConfig& config, const v1::Model& model,
                                    const ImageDataset& dataset) {
  FEDSCHED_ASSIGN_OR_RETURN(v1::ModelConfig resolved, ResolveModelConfig(config));
  FEDSCHED_RETURN_IF_ERROR(ValidateModel(resolved, model));
  const bool cnn = resolved.architecture() == kCnnArchitecture;
  std::vector<LayerSpec> layers = cnn ? std::vector<LayerSpec>() : LayersOf(resolved);
  TensorIndex index;
  if (!cnn) {
    FEDSCHED_ASSIGN_OR_RETURN(index, IndexTensors(resolved, layers, model));
  }
  if (dataset.pixels_per_image() != kReferenceInputSize) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Evaluate: images have %dx%d pixels; the reference models take %d",
                        dataset.rows, dataset.cols, kReferenceInputSize));
  }
  if (dataset.size <= 0 || dataset.labels.size() != static_cast<size_t>(dataset.size) ||
      dataset.pixels.size() != static_cast<size_t>(dataset.size) * kReferenceInputSize) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Evaluate: data set is empty or inconsistent (size %d, %d labels, %d pixels)", dataset.size,
        dataset.labels.size(), dataset.pixels.size()));
  }

  std::vector<const float*> kernels, biases;
  PointersOf(model, index, &kernels, &biases);
  Network net(std::move(layers));
  net.Bind(std::move(kernels), std::move(biases));
  std::vector<float> cnn_logits;

  int64_t correct = 0;
  double loss_sum = 0.0;
  for (int64_t start = 0; start < dataset.size; start += kEvalBatch) {
    const int rows = static_cast<int>(std::min<int64_t>(kEvalBatch, dataset.size - start));
    const float* x = dataset.pixels.data() + start * kReferenceInputSize;
    if (cnn) {
      FEDSCHED_RETURN_IF_ERROR(CnnLogits(model, x, rows, &cnn_logits));
    }
    const ConstMatMap logits = cnn ? ConstMatMap(cnn_logits.data(), rows, kNumClasses)
                                   : ConstMatMap(net.Forward(x, rows).data(), rows, kNumClasses);
    for (int i = 0; i < rows; ++i) {
      const int label = dataset.labels[start + i];
      if (label >= kNumClasses) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "Evaluate: label %d of sample %d is not in [0, %d)", label, start + i, kNumClasses));
      }
      auto row = logits.row(i);
      Eigen::Index argmax = 0;
      const float max = row.maxCoeff(&argmax);
      const float lse = max + std::log((row.array() - max).exp().sum());
      loss_sum += lse - row(label);
      correct += argmax == label;
    }
  }
  EvalResult result;
  result.num_examples = dataset.size;
  result.accuracy = static_cast<double>(correct) / dataset.size;
  result.mean_loss = loss_sum / dataset.size;
  return result;
}

struct ReferenceTrainer::Impl {
  v1::ModelConfig config;
  Network net;
  RowMat batch;  // [batch, 784] decoded pixels
  std::vector<int> labels;

  Impl(v1::ModelConfig c) : config(std::move(c)), net(LayersOf(config)) {}
};

ReferenceTrainer::ReferenceTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ReferenceTrainer::~ReferenceTrainer() = default;

absl::StatusOr<v1::ModelConfig> ReferenceConfigOf(const v1::Model& model) {
  v1::ModelConfig config;
  for (const v1::Tensor& t : model.tensors()) {
    if (t.name() == "dense/kernel") config.set_architecture("softmax");
    if (t.name() == "conv1/kernel") config.set_architecture(kCnnArchitecture);
    if (t.name() == "dense1/kernel" && t.shape_size() == 2 && t.shape(1) > 0 &&
        t.shape(1) <= std::numeric_limits<int32_t>::max()) {
      config.set_architecture("mlp");
      config.set_hidden_units(static_cast<int32_t>(t.shape(1)));
    }
  }
  if (config.architecture().empty()) {
    return absl::InvalidArgumentError(
        "model is not a reference architecture (no dense/kernel, dense1/kernel [784, H] or "
        "conv1/kernel)");
  }
  return ResolveModelConfig(config);
}

absl::StatusOr<std::unique_ptr<ReferenceTrainer>> ReferenceTrainer::Create(
    const v1::ModelConfig& config) {
  FEDSCHED_ASSIGN_OR_RETURN(v1::ModelConfig resolved, ResolveModelConfig(config));
  return std::unique_ptr<ReferenceTrainer>(
      new ReferenceTrainer(std::make_unique<Impl>(std::move(resolved))));
}

const v1::ModelConfig& ReferenceTrainer::config() const { return impl_->config; }

absl::StatusOr<int64_t> ActivationFloatsPerSample(const v1::ModelConfig& config) {
  FEDSCHED_ASSIGN_OR_RETURN(v1::ModelConfig c, ResolveModelConfig(config));
  constexpr int64_t kLogits = 2 * kNumClasses;
  if (c.architecture() == kCnnArchitecture) {
    return kReferenceInputSize + 2 * 6 * 24 * 24 + 6 * 12 * 12 + 2 * 16 * 8 * 8 + 16 * 4 * 4 +
           2 * 64 + kLogits;
  }
  if (c.architecture() == "softmax") return kReferenceInputSize + kLogits;
  return kReferenceInputSize + 2 * static_cast<int64_t>(c.hidden_units()) + kLogits;
}

void ReferenceTrainer::SetEvalSplit(std::shared_ptr<const ImageDataset> split) {
  eval_split_ = std::move(split);
}

absl::StatusOr<EvalReport> ReferenceTrainer::Evaluate(const v1::Model& global) {
  if (eval_split_ == nullptr) return absl::UnimplementedError("no local eval split");
  // ReferenceConfigOf recognises the CNN by its conv1/kernel as well.
  FEDSCHED_ASSIGN_OR_RETURN(v1::ModelConfig config, ReferenceConfigOf(global));
  FEDSCHED_ASSIGN_OR_RETURN(EvalResult r, ::fedsched::Evaluate(config, global, *eval_split_));
  EvalReport report;
  report.num_examples = r.num_examples;
  report.accuracy = r.accuracy;
  report.mean_loss = r.mean_loss;
  return report;
}

int64_t ReferenceTrainer::PeakMemoryBytes(const TrainRequest& request) const {
  if (request.global == nullptr) return 0;
  v1::ModelConfig config;
  if (LooksLikeCnn(*request.global)) {
    config.set_architecture(kCnnArchitecture);
  } else if (absl::StatusOr<v1::ModelConfig> c = ReferenceConfigOf(*request.global); c.ok()) {
    config = *c;
  } else {
    return 0;
  }
  absl::StatusOr<int64_t> activations = ActivationFloatsPerSample(config);
  if (!activations.ok()) return 0;
  int64_t parameters = 0;
  for (const v1::Tensor& t : request.global->tensors()) parameters += t.data_size();
  const int64_t copies = 3 + (request.proximal_mu > 0 ? 1 : 0);
  const int64_t floats =
      parameters * copies + *activations * std::max<int64_t>(request.batch_size, 1);
  return 4 * floats + 12 * static_cast<int64_t>(request.sample_ids.size());
}

absl::StatusOr<TrainResult> ReferenceTrainer::Train(const TrainRequest& request,
                                                    SampleSource& samples) {
  FEDSCHED_RETURN_IF_ERROR(CheckTrainRequest(request));
  // The CNN (models/cnn.h) has its own trainer; the server's model decides, as below.
  if (LooksLikeCnn(*request.global)) {
    if (impl_->config.architecture() != kCnnArchitecture) {
      v1::ModelConfig cnn = impl_->config;
      cnn.set_architecture(kCnnArchitecture);
      impl_ = std::make_unique<Impl>(std::move(cnn));
    }
    return CnnTrainer().Train(request, samples);
  }
  absl::StatusOr<TensorIndex> indexed =
      impl_->config.architecture() == kCnnArchitecture
          ? absl::StatusOr<TensorIndex>(absl::InvalidArgumentError(
                "model has no tensor \"conv1/kernel\" (architecture cnn)"))
          : IndexTensors(impl_->config, impl_->net.layers(), *request.global);
  if (!indexed.ok()) {
    // The server's model decides the architecture: adopt the one its tensors describe (a
    // softmax layer, or an MLP with another hidden width) when it is a reference architecture.
    if (absl::StatusOr<v1::ModelConfig> adopted = ReferenceConfigOf(*request.global);
        adopted.ok()) {
      auto impl = std::make_unique<Impl>(*std::move(adopted));
      if (absl::StatusOr<TensorIndex> retry =
              IndexTensors(impl->config, impl->net.layers(), *request.global);
          retry.ok()) {
        impl_ = std::move(impl);
        indexed = std::move(retry);
      }
    }
  }
  FEDSCHED_ASSIGN_OR_RETURN(TensorIndex index, std::move(indexed));
  Impl& im = *impl_;

  TrainResult result;
  result.trained = *request.global;
  std::vector<float*> kernels, biases;
  PointersOf(result.trained, index, &kernels, &biases);
  std::vector<const float*> global_kernels, global_biases;
  PointersOf(*request.global, index, &global_kernels, &global_biases);
  im.net.Bind(std::vector<const float*>(kernels.begin(), kernels.end()),
              std::vector<const float*>(biases.begin(), biases.end()));

  const int64_t total = static_cast<int64_t>(request.sample_ids.size());
  result.per_sample_losses.resize(total);
  double loss_sum = 0.0;
  for (int64_t start = 0, step = 0; start < total; start += request.batch_size, ++step) {
    const int rows = static_cast<int>(std::min<int64_t>(request.batch_size, total - start));
    im.batch.resize(rows, kReferenceInputSize);
    im.labels.resize(rows);
    for (int i = 0; i < rows; ++i) {
      FEDSCHED_ASSIGN_OR_RETURN(std::string_view bytes,
                                samples.Read(request.sample_ids[start + i]));
      FEDSCHED_RETURN_IF_ERROR(
          DecodeSample(bytes, kReferenceInputSize, im.batch.row(i).data(), &im.labels[i]));
    }
    im.net.Forward(im.batch.data(), rows);
    float* losses = result.per_sample_losses.data() + start;
    im.net.SoftmaxCrossEntropy(im.labels.data(), losses);
    for (int i = 0; i < rows; ++i) loss_sum += losses[i];
    if (!std::isfinite(loss_sum)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("Train: loss became non-finite at step %d (learning rate %g too high?)",
                          step, request.learning_rate));
    }
    im.net.BackwardAndStep(im.batch.data(), im.labels.data(), request.learning_rate,
                           request.proximal_mu, kernels, biases, global_kernels, global_biases);
  }
  FEDSCHED_RETURN_IF_ERROR(CheckTrainedFinite(result.trained, request.learning_rate));
  result.num_examples = total;
  result.mean_loss = loss_sum / total;
  return result;
}

}  // namespace fedsched

// The LeNet-style CNN of models/cnn.h: convolutions as im2col + matrix products (Eigen),
// max pooling with remembered arg-max positions for the backward pass.
#include "models/cnn.h"

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "models/idx.h"
#include "models/rng.h"
#include "models/samples.h"
#include "models/train_checks.h"

namespace fedsched {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMat>;
using ConstMatMap = Eigen::Map<const RowMat>;
using ConstVecMap = Eigen::Map<const Eigen::RowVectorXf>;

constexpr int kIn = 28, kK = 5;
constexpr int kC1 = 6, kH1 = 24, kP1 = 12;  // conv1 output side, pool1 output side
constexpr int kC2 = 16, kH2 = 8, kP2 = 4;
constexpr int kFeatures = kC2 * kP2 * kP2;  // 256
constexpr int kHidden = 64;
constexpr int kClasses = 10;

// Tensor slots in the order of the file comment.
enum Slot { kConv1K, kConv1B, kConv2K, kConv2B, kFc1K, kFc1B, kFc2K, kFc2B, kSlots };
struct TensorSpec {
  const char* name;
  std::vector<int64_t> shape;
};
const std::array<TensorSpec, kSlots>& Specs() {
  static const std::array<TensorSpec, kSlots>* specs = new std::array<TensorSpec, kSlots>{{
      {"conv1/kernel", {kC1, 1, kK, kK}},
      {"conv1/bias", {kC1}},
      {"conv2/kernel", {kC2, kC1, kK, kK}},
      {"conv2/bias", {kC2}},
      {"fc1/kernel", {kFeatures, kHidden}},
      {"fc1/bias", {kHidden}},
      {"fc2/kernel", {kHidden, kClasses}},
      {"fc2/bias", {kClasses}},
  }};
  return *specs;
}

// Position in Model::tensors of each slot, after checking names and shapes.
absl::StatusOr<std::array<int, kSlots>> IndexCnn(const v1::Model& model) {
  std::array<int, kSlots> index;
  index.fill(-1);
  for (int i = 0; i < model.tensors_size(); ++i) {
    const v1::Tensor& t = model.tensors(i);
    int slot = -1;
    for (int s = 0; s < kSlots; ++s) {
      if (t.name() == Specs()[s].name) slot = s;
    }
    if (slot < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("model has unexpected tensor \"%s\" (architecture cnn)", t.name()));
    }
    if (index[slot] >= 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("model tensor \"%s\" appears more than once", t.name()));
    }
    const std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    const std::vector<int64_t>& want = Specs()[slot].shape;
    int64_t elements = 1;
    for (int64_t d : want) elements *= d;
    if (shape != want || t.data_size() != elements) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "model tensor \"%s\" has shape [%s] and %d values, want [%s] (architecture cnn)",
          t.name(), absl::StrJoin(shape, ","), t.data_size(), absl::StrJoin(want, ","), elements));
    }
    index[slot] = i;
  }
  for (int s = 0; s < kSlots; ++s) {
    if (index[s] < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("model has no tensor \"%s\" (architecture cnn)", Specs()[s].name));
    }
  }
  return index;
}

// cols [channels * k * k, out * out]: row (c * k + ki) * k + kj, column oy * out + ox holds
// in[c][oy + ki][ox + kj] of the [channels, side, side] input.
void Im2Col(const float* in, int channels, int side, RowMat* cols) {
  const int out = side - kK + 1;
  cols->resize(channels * kK * kK, out * out);
  for (int c = 0; c < channels; ++c) {
    for (int ki = 0; ki < kK; ++ki) {
      for (int kj = 0; kj < kK; ++kj) {
        float* row = cols->row((c * kK + ki) * kK + kj).data();
        for (int oy = 0; oy < out; ++oy) {
          const float* src = in + (c * side + oy + ki) * side + kj;
          for (int ox = 0; ox < out; ++ox) row[oy * out + ox] = src[ox];
        }
      }
    }
  }
}

// The adjoint of Im2Col: adds each column entry back to its input position (`d_in` zeroed
// by the caller).
void Col2Im(const RowMat& d_cols, int channels, int side, float* d_in) {
  const int out = side - kK + 1;
  for (int c = 0; c < channels; ++c) {
    for (int ki = 0; ki < kK; ++ki) {
      for (int kj = 0; kj < kK; ++kj) {
        const float* row = d_cols.row((c * kK + ki) * kK + kj).data();
        for (int oy = 0; oy < out; ++oy) {
          float* dst = d_in + (c * side + oy + ki) * side + kj;
          for (int ox = 0; ox < out; ++ox) dst[ox] += row[oy * out + ox];
        }
      }
    }
  }
}

// 2x2 max pooling of [channels, side, side] `in` into `out` ([channels, side/2, side/2]);
// arg[i] is the input position of out[i]'s maximum.
void MaxPool(const float* in, int channels, int side, float* out, int* arg) {
  const int half = side / 2;
  for (int c = 0; c < channels; ++c) {
    for (int y = 0; y < half; ++y) {
      for (int x = 0; x < half; ++x) {
        int best = (c * side + 2 * y) * side + 2 * x;
        for (int dy = 0; dy < 2; ++dy) {
          for (int dx = 0; dx < 2; ++dx) {
            const int at = (c * side + 2 * y + dy) * side + 2 * x + dx;
            if (in[at] > in[best]) best = at;
          }
        }
        const int o = (c * half + y) * half + x;
        out[o] = in[best];
        arg[o] = best;
      }
    }
  }
}

// One image's convolutional stage, kept for the backward pass.
struct ConvTrace {
  RowMat cols1, a1, cols2, a2;  // im2col inputs and post-ReLU outputs of conv1 / conv2
  RowMat p1;                    // [6, 144] pool1 output
  std::vector<int> arg1, arg2;  // pool arg-max positions into a1 / a2
};

// conv1 -> pool1 -> conv2 -> pool2 of one image; writes the 256 features to `features`.
void ConvForward(const v1::Model& m, const std::array<int, kSlots>& ix, const float* image,
                 ConvTrace* t, float* features) {
  Im2Col(image, 1, kIn, &t->cols1);
  ConstMatMap w1(m.tensors(ix[kConv1K]).data().data(), kC1, kK * kK);
  t->a1.noalias() = w1 * t->cols1;
  t->a1.colwise() += ConstVecMap(m.tensors(ix[kConv1B]).data().data(), kC1).transpose();
  t->a1 = t->a1.cwiseMax(0.0f);
  t->p1.resize(kC1, kP1 * kP1);
  t->arg1.resize(kC1 * kP1 * kP1);
  MaxPool(t->a1.data(), kC1, kH1, t->p1.data(), t->arg1.data());
  Im2Col(t->p1.data(), kC1, kP1, &t->cols2);
  ConstMatMap w2(m.tensors(ix[kConv2K]).data().data(), kC2, kC1 * kK * kK);
  t->a2.noalias() = w2 * t->cols2;
  t->a2.colwise() += ConstVecMap(m.tensors(ix[kConv2B]).data().data(), kC2).transpose();
  t->a2 = t->a2.cwiseMax(0.0f);
  t->arg2.resize(kFeatures);
  MaxPool(t->a2.data(), kC2, kH2, features, t->arg2.data());
}

// The dense stage over a batch: hidden [rows, 64] (post-ReLU) and logits [rows, 10].
void DenseForward(const v1::Model& m, const std::array<int, kSlots>& ix, const RowMat& features,
                  RowMat* hidden, RowMat* logits) {
  hidden->noalias() =
      features * ConstMatMap(m.tensors(ix[kFc1K]).data().data(), kFeatures, kHidden);
  hidden->rowwise() += ConstVecMap(m.tensors(ix[kFc1B]).data().data(), kHidden);
  *hidden = hidden->cwiseMax(0.0f);
  logits->noalias() = *hidden * ConstMatMap(m.tensors(ix[kFc2K]).data().data(), kHidden, kClasses);
  logits->rowwise() += ConstVecMap(m.tensors(ix[kFc2B]).data().data(), kClasses);
}

float* GradData(v1::Model* g, const std::array<int, kSlots>& ix, Slot s) {
  return g->mutable_tensors(ix[s])->mutable_data()->mutable_data();
}

// Backward through conv2 / pool1 / conv1 of one image, given d(features) ([256]); adds to the
// conv gradients.
void ConvBackward(const v1::Model& m, const std::array<int, kSlots>& ix, const ConvTrace& t,
                  const float* d_features, v1::Model* g) {
  RowMat d_a2 = RowMat::Zero(kC2, kH2 * kH2);
  for (int i = 0; i < kFeatures; ++i) d_a2.data()[t.arg2[i]] += d_features[i];
  d_a2.array() *= (t.a2.array() > 0.0f).cast<float>();
  MatMap(GradData(g, ix, kConv2K), kC2, kC1 * kK * kK).noalias() += d_a2 * t.cols2.transpose();
  Eigen::Map<Eigen::VectorXf>(GradData(g, ix, kConv2B), kC2) += d_a2.rowwise().sum();
  const RowMat d_cols2 =
      ConstMatMap(m.tensors(ix[kConv2K]).data().data(), kC2, kC1 * kK * kK).transpose() * d_a2;
  RowMat d_p1 = RowMat::Zero(kC1, kP1 * kP1);
  Col2Im(d_cols2, kC1, kP1, d_p1.data());
  RowMat d_a1 = RowMat::Zero(kC1, kH1 * kH1);
  for (int i = 0; i < kC1 * kP1 * kP1; ++i) d_a1.data()[t.arg1[i]] += d_p1.data()[i];
  d_a1.array() *= (t.a1.array() > 0.0f).cast<float>();
  MatMap(GradData(g, ix, kConv1K), kC1, kK * kK).noalias() += d_a1 * t.cols1.transpose();
  Eigen::Map<Eigen::VectorXf>(GradData(g, ix, kConv1B), kC1) += d_a1.rowwise().sum();
}

}  // namespace

v1::Model CnnInitialModel(uint64_t seed) {
  Rng rng(seed == 0 ? 1 : seed);
  v1::Model model;
  for (int s = 0; s < kSlots; ++s) {
    const TensorSpec& spec = Specs()[s];
    v1::Tensor* t = model.add_tensors();
    t->set_name(spec.name);
    int64_t n = 1;
    for (int64_t d : spec.shape) {
      t->add_shape(d);
      n *= d;
    }
    t->mutable_data()->Resize(static_cast<int>(n), 0.0f);
    if (s % 2 == 1) continue;  // biases stay zero
    // Inputs per output: C x k x k for a convolution, the rows of a dense kernel.
    const int64_t fan_in = s >= kFc1K ? spec.shape[0] : n / spec.shape[0];
    float* w = t->mutable_data()->mutable_data();
    if (s == kFc2K) {
      const double limit = std::sqrt(6.0 / (kHidden + kClasses));
      for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>(limit * (2 * rng.Uniform() - 1));
    } else {
      const double stddev = std::sqrt(2.0 / static_cast<double>(fan_in));
      for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>(stddev * rng.Normal());
    }
  }
  return model;
}

absl::Status ValidateCnnModel(const v1::Model& model) { return IndexCnn(model).status(); }

bool LooksLikeCnn(const v1::Model& model) {
  for (const v1::Tensor& t : model.tensors()) {
    if (t.name() == "conv1/kernel") return true;
  }
  return false;
}

absl::Status CnnLogits(const v1::Model& model, const float* x, int rows,
                       std::vector<float>* logits) {
  FEDSCHED_ASSIGN_OR_RETURN(const auto ix, IndexCnn(model));
  if (rows <= 0) return absl::InvalidArgumentError("CnnLogits: rows must be > 0");
  RowMat features(rows, kFeatures), hidden, out;
  ConvTrace t;
  for (int i = 0; i < rows; ++i) {
    ConvForward(model, ix, x + static_cast<int64_t>(i) * kIn * kIn, &t, features.row(i).data());
  }
  DenseForward(model, ix, features, &hidden, &out);
  logits->assign(out.data(), out.data() + out.size());
  return absl::OkStatus();
}

absl::StatusOr<double> CnnLossAndGradient(const v1::Model& model, const float* x, const int* labels,
                                          int rows, float* per_sample_losses, v1::Model* gradient) {
  FEDSCHED_ASSIGN_OR_RETURN(const auto ix, IndexCnn(model));
  if (rows <= 0) return absl::InvalidArgumentError("CnnLossAndGradient: rows must be > 0");
  for (int i = 0; i < rows; ++i) {
    if (labels[i] < 0 || labels[i] >= kClasses) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "CnnLossAndGradient: label %d of image %d is not in [0, 10)", labels[i], i));
    }
  }
  std::vector<ConvTrace> traces(rows);
  RowMat features(rows, kFeatures), hidden, probs;
  for (int i = 0; i < rows; ++i) {
    ConvForward(model, ix, x + static_cast<int64_t>(i) * kIn * kIn, &traces[i],
                features.row(i).data());
  }
  DenseForward(model, ix, features, &hidden, &probs);
  double loss_sum = 0;
  for (int i = 0; i < rows; ++i) {
    auto row = probs.row(i);
    const float max = row.maxCoeff();
    const float shifted = row(labels[i]) - max;
    row = (row.array() - max).exp();
    const float sum = row.sum();
    const float loss = std::log(sum) - shifted;
    row /= sum;
    loss_sum += loss;
    if (per_sample_losses != nullptr) per_sample_losses[i] = loss;
  }
  if (gradient == nullptr) return loss_sum / rows;
  *gradient = model;
  for (v1::Tensor& t : *gradient->mutable_tensors()) {
    std::fill(t.mutable_data()->begin(), t.mutable_data()->end(), 0.0f);
  }
  // d(mean loss)/d(logits) = (softmax - one_hot) / rows.
  RowMat d_logits = probs;
  for (int i = 0; i < rows; ++i) d_logits(i, labels[i]) -= 1.0f;
  d_logits *= 1.0f / static_cast<float>(rows);
  MatMap(GradData(gradient, ix, kFc2K), kHidden, kClasses).noalias() =
      hidden.transpose() * d_logits;
  Eigen::Map<Eigen::RowVectorXf>(GradData(gradient, ix, kFc2B), kClasses) =
      d_logits.colwise().sum();
  RowMat d_hidden =
      d_logits * ConstMatMap(model.tensors(ix[kFc2K]).data().data(), kHidden, kClasses).transpose();
  d_hidden.array() *= (hidden.array() > 0.0f).cast<float>();
  MatMap(GradData(gradient, ix, kFc1K), kFeatures, kHidden).noalias() =
      features.transpose() * d_hidden;
  Eigen::Map<Eigen::RowVectorXf>(GradData(gradient, ix, kFc1B), kHidden) = d_hidden.colwise().sum();
  const RowMat d_features =
      d_hidden *
      ConstMatMap(model.tensors(ix[kFc1K]).data().data(), kFeatures, kHidden).transpose();
  for (int i = 0; i < rows; ++i) {
    ConvBackward(model, ix, traces[i], d_features.row(i).data(), gradient);
  }
  return loss_sum / rows;
}

absl::StatusOr<TrainResult> CnnTrainer::Train(const TrainRequest& request, SampleSource& samples) {
  FEDSCHED_RETURN_IF_ERROR(CheckTrainRequest(request));
  FEDSCHED_RETURN_IF_ERROR(ValidateCnnModel(*request.global));
  TrainResult result;
  result.trained = *request.global;
  const int64_t total = static_cast<int64_t>(request.sample_ids.size());
  result.per_sample_losses.resize(total);
  RowMat batch;
  std::vector<int> labels;
  v1::Model gradient;
  double loss_sum = 0;
  for (int64_t start = 0, step = 0; start < total; start += request.batch_size, ++step) {
    const int rows = static_cast<int>(std::min<int64_t>(request.batch_size, total - start));
    batch.resize(rows, kIn * kIn);
    labels.resize(rows);
    for (int i = 0; i < rows; ++i) {
      FEDSCHED_ASSIGN_OR_RETURN(std::string_view bytes,
                                samples.Read(request.sample_ids[start + i]));
      FEDSCHED_RETURN_IF_ERROR(DecodeSample(bytes, kIn * kIn, batch.row(i).data(), &labels[i]));
    }
    FEDSCHED_ASSIGN_OR_RETURN(
        double mean, CnnLossAndGradient(result.trained, batch.data(), labels.data(), rows,
                                        result.per_sample_losses.data() + start, &gradient));
    loss_sum += mean * rows;
    if (!std::isfinite(loss_sum)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("Train: loss became non-finite at step %d (learning rate %g too high?)",
                          step, request.learning_rate));
    }
    const float lr = request.learning_rate, mu = request.proximal_mu;
    for (int k = 0; k < result.trained.tensors_size(); ++k) {
      float* w = result.trained.mutable_tensors(k)->mutable_data()->mutable_data();
      const float* g = gradient.tensors(k).data().data();
      const float* w0 = request.global->tensors(k).data().data();
      const int n = result.trained.tensors(k).data_size();
      for (int i = 0; i < n; ++i) w[i] -= lr * (g[i] + mu * (w[i] - w0[i]));
    }
  }
  FEDSCHED_RETURN_IF_ERROR(CheckTrainedFinite(result.trained, request.learning_rate));
  result.num_examples = total;
  result.mean_loss = loss_sum / total;
  return result;
}

}  // namespace fedsched

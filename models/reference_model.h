// fedsched's reference models for 28 x 28 grey-scale images with 10 classes (Fashion-MNIST):
//   "softmax"  multinomial logistic regression 784-10:
//                logits = x * dense/kernel [784, 10] + dense/bias [10]
//   "mlp"      one hidden ReLU layer 784-H-10 (H = hidden_units, default 128):
//                h = relu(x * dense1/kernel [784, H] + dense1/bias [H])
//                logits = h * dense2/kernel [H, 10] + dense2/bias [10]
//   "cnn"      a LeNet-style CNN (conv 6@5x5, pool, conv 16@5x5, pool, 256-64-10): models/cnn.h
// Inputs are row vectors of pixel intensities in [0, 1]; kernels are stored [fan_in, fan_out]
// row-major in v1::Tensor. Loss: softmax cross-entropy in nats (computed with the max-shifted
// log-sum-exp, so large logits do not overflow). Training: minibatch SGD on the batch-mean loss,
// optionally with the FedProx proximal term (Li et al., MLSys 2020).
// Tensors are matched by name, never by position; any order of tensors in a v1::Model is accepted.
#ifndef FEDSCHED_CLIENT_MODELS_REFERENCE_MODEL_H_
#define FEDSCHED_CLIENT_MODELS_REFERENCE_MODEL_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "models/idx.h"
#include "models/trainer.h"

namespace fedsched {

// Input features of the reference models: 28 x 28 pixels.
inline constexpr int kReferenceInputSize = 784;
// Largest accepted ModelConfig::hidden_units.
inline constexpr int kMaxHiddenUnits = 65536;

// `config` with its defaults filled in: architecture "" -> "mlp", hidden_units 0 -> 128,
// init_seed 0 -> 1 (hidden_units is kept but unused for "softmax").
// Errors: INVALID_ARGUMENT for an architecture other than "mlp" / "softmax" / "cnn", or
// hidden_units
// outside [0, kMaxHiddenUnits].
absl::StatusOr<v1::ModelConfig> ResolveModelConfig(const v1::ModelConfig& config);

// The initial weights of `config`: with initial_weights_path set, the file's tensors
// (LoadModelFile, models/named_model.h; checked against the architecture when one is set);
// otherwise freshly initialised weights (defaults as ResolveModelConfig), deterministic in
// init_seed: the ReLU layer's kernel is He-normal (std sqrt(2 / fan_in); He et al. 2015), the
// output layer's kernel Glorot-uniform (limit sqrt(6 / (fan_in + fan_out)); Glorot & Bengio
// 2010), biases zero. Tensor order: dense1/kernel, dense1/bias, dense2/kernel, dense2/bias (mlp)
// or dense/kernel, dense/bias (softmax).
// Errors: as ResolveModelConfig; as LoadModelFile; INVALID_ARGUMENT when the file does not match
// the architecture.
absl::StatusOr<v1::Model> InitialModel(const v1::ModelConfig& config);

// Checks that `model` has exactly the tensors of `config`'s architecture, each with the right
// shape and data_size() == product(shape).
// Errors: INVALID_ARGUMENT naming the missing, duplicated, unexpected or mis-shaped tensor; or as
// ResolveModelConfig.
absl::Status ValidateModel(const v1::ModelConfig& config, const v1::Model& model);

// Test-set quality of a model.
struct EvalResult {
  // Fraction of samples whose arg-max logit is the label, in [0, 1].
  double accuracy = 0.0;
  // Mean softmax cross-entropy, nats per sample.
  double mean_loss = 0.0;
  // Samples evaluated (= dataset.size).
  int64_t num_examples = 0;
};

// Evaluates `model` on every sample of `dataset` (forward pass in batches of 1024; about 0.1 s
// for 10,000 images with the 784-128-10 MLP on one core).
// Errors: INVALID_ARGUMENT if the model fails ValidateModel, the images are not 784 pixels, the
// data set is empty or inconsistent (pixels/labels sizes), or a label is >= kNumClasses.
absl::StatusOr<EvalResult> Evaluate(const v1::ModelConfig& config, const v1::Model& model,
                                    const ImageDataset& dataset);

// The reference Trainer: minibatch SGD over the reference models on samples in the encoding of
// models/samples.h (read through a SampleSource).
// Each minibatch: forward pass, per-sample losses recorded, then one step
//   w <- w - lr * (grad of mean batch loss + mu * (w - w_global))
// (FedProx, Li et al. 2020: the gradient of (mu/2)||w - w_global||^2; biases included).
// The last minibatch may be smaller when sample_ids.size() is not a multiple of batch_size.
// One epoch of 3,000 samples at batch 32 with the 784-128-10 MLP takes about 0.1 s on one core.
// Thread-safety: Train may be called from one thread at a time per instance (it reuses scratch
// buffers); use one ReferenceTrainer per thread.
// The reference architecture whose tensors `model` has: "softmax" if it has dense/kernel, "mlp"
// with hidden_units H if it has dense1/kernel [784, H]; other fields defaulted (as
// ResolveModelConfig). Reads names and shapes only. Errors: INVALID_ARGUMENT if neither tensor
// is there, or as ResolveModelConfig for an out-of-range H.
absl::StatusOr<v1::ModelConfig> ReferenceConfigOf(const v1::Model& model);

// Floats of activations the reference trainer keeps per sample of a minibatch for `config`
// (defaults as ResolveModelConfig): the input row (784) plus every layer's output, twice for a
// ReLU layer (pre- and post-activation) and for the logits (logits and probabilities):
// softmax 784 + 20 = 804; mlp 784 + 2H + 20; cnn 784 + 2 x 3456 + 864 + 2 x 1024 + 256 + 2 x 64
// + 20 = 11012 (models/cnn.h). Errors: as ResolveModelConfig.
absl::StatusOr<int64_t> ActivationFloatsPerSample(const v1::ModelConfig& config);

class ReferenceTrainer : public Trainer {
 public:
  // Errors: as ResolveModelConfig.
  static absl::StatusOr<std::unique_ptr<ReferenceTrainer>> Create(const v1::ModelConfig& config);
  ~ReferenceTrainer() override;

  ReferenceTrainer(const ReferenceTrainer&) = delete;
  ReferenceTrainer& operator=(const ReferenceTrainer&) = delete;

  // Trains from request.global over request.sample_ids. The server's model decides the
  // architecture: when request.global is another reference architecture than the trainer's
  // (softmax, or an MLP of another width; see ReferenceConfigOf), the trainer adopts it and
  // config() changes. TrainResult::trained keeps the tensor order of request.global;
  // per_sample_losses[i] is the loss of sample_ids[i] in the forward pass before its minibatch's
  // step. Errors: INVALID_ARGUMENT if request.global is null or fails ValidateModel (the message
  // names the tensor), sample_ids is empty, batch_size <= 0, learning_rate is not finite and > 0,
  // proximal_mu is not finite and >= 0, or training diverges (a non-finite loss; the message
  // names the step); a failed Read's status as returned by `samples`; INVALID_ARGUMENT /
  // DATA_LOSS from DecodeSample for a malformed sample.
  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource& samples) override;

  // 4 bytes x (P x (3 + [mu > 0]) + ActivationFloatsPerSample x batch_size) + 12 bytes per
  // sample id (the id and its recorded loss), P = the floats of request.global (weights,
  // gradients, the global model kept for the delta, FedProx's anchor). The architecture is
  // request.global's (ReferenceConfigOf, or the CNN). 0 for a null or unrecognised model.
  int64_t PeakMemoryBytes(const TrainRequest& request) const override;

  // Client-side evaluation (docs/ARCHITECTURE.md "Client-side evaluation"): the free Evaluate
  // above of `global` (the architecture its tensors describe, as Train adopts it: the CNN, a
  // softmax layer or an MLP of any width) on the eval split set by SetEvalSplit. Errors:
  // UNIMPLEMENTED when no eval split is set (the SDK then reports nothing); INVALID_ARGUMENT for
  // a model that is no reference architecture, and as the free Evaluate.
  absl::StatusOr<EvalReport> Evaluate(const v1::Model& global) override;
  // The device's held-out data for Evaluate (shared, not copied; null clears it).
  void SetEvalSplit(std::shared_ptr<const ImageDataset> split);

  // The resolved configuration (defaults filled in).
  const v1::ModelConfig& config() const;

 private:
  struct Impl;
  explicit ReferenceTrainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<const ImageDataset> eval_split_;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_MODELS_REFERENCE_MODEL_H_

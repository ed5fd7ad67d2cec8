// A Trainer over LibTorch: trains a C++-defined torch::nn module from the server's
// global weights. The network is the LeNet-style CNN of models/cnn.h (conv 6@5x5, max-pool 2,
// conv 16@5x5, max-pool 2, fc 256-64, ReLU, fc 64-10) with PyTorch's tensor names and layouts,
// so that it is the same model as examples/pytorch_fmnist.py's LeNet:
//   conv1.weight [6, 1, 5, 5]   conv1.bias [6]   conv2.weight [16, 6, 5, 5]   conv2.bias [16]
//   fc1.weight [64, 256]        fc1.bias [64]    fc2.weight [10, 64]          fc2.bias [10]
// (Linear weights are [out, in], unlike the Eigen models' [in, out] kernels.) The server runs it
// as a named-tensor model (models/named_model.h) from the file ExportInitialWeights writes.
// With TorchTrainerOptions.reference_layout the trainer reads and writes the same network in the
// tensor names and layouts of models/cnn.h instead (conv1/kernel ..., fc kernels [in, out]), so
// that it trains the simulator's "cnn" model (docs/guides/SIMULATION.md "Trainers") and its update
// can be compared with CnnTrainer's. This header includes no LibTorch header (they take about a
// minute per translation unit): everything torch lives in torch_trainer.cc.
#ifndef FEDSCHED_MODELS_TORCH_TORCH_TRAINER_H_
#define FEDSCHED_MODELS_TORCH_TORCH_TRAINER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "fedsched/v1/tensor.pb.h"
#include "models/idx.h"
#include "models/trainer.h"

namespace fedsched {

struct TorchTrainerOptions {
  // The network: "cnn" (the only one so far). Default: "cnn".
  std::string model = "cnn";
  // LibTorch intra-op threads (torch::set_num_threads, process-wide); 0 = leave as is.
  // Default: 1 (a device trains on one core; also makes the result bit-reproducible).
  int threads = 1;
  // True: weights in models/cnn.h's names and layouts (conv1/kernel [6, 1, 5, 5], fc1/kernel
  // [256, 64], ...; Linear kernels transposed on the way in and out). Default: false (PyTorch's
  // names and layouts, the file comment's).
  bool reference_layout = false;
};

// Minibatch SGD with LibTorch over samples in the encoding of models/samples.h (read through
// the SampleSource, so the on-device cache serves them), the same step as the reference
// trainers: per minibatch a forward pass (per-sample softmax cross-entropy, nats, recorded
// before the step), then w <- w - lr * (grad of the batch-mean loss + mu * (w - w_global))
// (FedProx, Li et al. 2020). Thread-safety: one Train at a time per instance.
class TorchTrainer : public Trainer {
 public:
  // Errors: INVALID_ARGUMENT for an unknown options.model.
  static absl::StatusOr<std::unique_ptr<TorchTrainer>> Create(const TorchTrainerOptions& options);
  ~TorchTrainer() override;
  TorchTrainer(const TorchTrainer&) = delete;
  TorchTrainer& operator=(const TorchTrainer&) = delete;

  // Trains from request.global; TrainResult::trained keeps request.global's tensor order.
  // Errors: INVALID_ARGUMENT when request.global lacks a tensor of the network or has one of
  // another shape or an unexpected one (the message names it), sample_ids is empty, batch_size
  // <= 0, learning_rate <= 0, proximal_mu < 0, or the loss is not finite; a failed Read's status;
  // DecodeSample's errors for a malformed sample.
  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource& samples) override;

  // Client-side evaluation (docs/ARCHITECTURE.md "Client-side evaluation"): accuracy and mean
  // softmax cross-entropy (nats) of `global` on the eval split set by SetEvalSplit, forward
  // passes only (batches of 1,024). Errors: UNIMPLEMENTED when no eval split is set (the SDK then
  // reports nothing); INVALID_ARGUMENT as Train for a model that does not fit the network, or
  // for an eval split whose images are not 28 x 28.
  absl::StatusOr<EvalReport> Evaluate(const v1::Model& global) override;
  // The device's held-out data for Evaluate (shared, not copied; null clears it).
  void SetEvalSplit(std::shared_ptr<const ImageDataset> split) { eval_split_ = std::move(split); }

  // Freshly initialised weights (LibTorch's default initialisation after torch::manual_seed(seed)),
  // in the tensor order of the file comment: the file for ModelConfig.initial_weights_path.
  v1::Model InitialWeights(uint64_t seed);

 private:
  struct Impl;
  explicit TorchTrainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<const ImageDataset> eval_split_;
};

}  // namespace fedsched

#endif  // FEDSCHED_MODELS_TORCH_TORCH_TRAINER_H_

// A small LeNet-style convolutional network for 28 x 28 grey-scale images with 10 classes
// (Fashion-MNIST), in Eigen, after LeCun et al., Proc. IEEE 1998 (LeNet-5), with ReLU and max
// pooling in place of the sigmoid and sub-sampling layers (a model that is not
// convex-ish, for the time-to-accuracy experiment):
//   conv1  6 filters 5x5, valid, + ReLU      [1, 28, 28] -> [6, 24, 24]
//   pool1  max 2x2, stride 2                               -> [6, 12, 12]
//   conv2  16 filters 5x5 over 6 channels, valid, + ReLU   -> [16, 8, 8]
//   pool2  max 2x2, stride 2                               -> [16, 4, 4] = 256 features
//   fc1    256 -> 64 + ReLU
//   fc2    64 -> 10 logits; softmax cross-entropy in nats
// Tensors (matched by name, any order): conv1/kernel [6, 1, 5, 5], conv1/bias [6],
// conv2/kernel [16, 6, 5, 5], conv2/bias [16], fc1/kernel [256, 64], fc1/bias [64],
// fc2/kernel [64, 10], fc2/bias [10]; row-major; 19,670 parameters. Flattening order of the
// 256 features: channel, row, column.
#ifndef FEDSCHED_MODELS_CNN_H_
#define FEDSCHED_MODELS_CNN_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/tensor.pb.h"
#include "models/trainer.h"

namespace fedsched {

// ModelConfig.architecture value of this network.
inline constexpr char kCnnArchitecture[] = "cnn";

// Freshly initialised weights, deterministic in `seed`: kernels followed by a ReLU are
// He-normal (std sqrt(2 / fan_in)), fc2's kernel Glorot-uniform, biases zero. Tensor order as
// in the file comment.
v1::Model CnnInitialModel(uint64_t seed);

// OK iff `model` has exactly the eight tensors of the file comment with their shapes.
// Errors: INVALID_ARGUMENT naming the missing, duplicated, unexpected or mis-shaped tensor.
absl::Status ValidateCnnModel(const v1::Model& model);

// True iff `model` has a tensor named conv1/kernel (it is meant to be this network).
bool LooksLikeCnn(const v1::Model& model);

// Forward and backward pass over `rows` images at `x` ([rows, 784] row-major, pixels in
// [0, 1]) with labels in [0, 10): returns the mean cross-entropy (nats), writes each image's
// loss to `per_sample_losses` ([rows], may be null) and, if `gradient` is not null, the
// gradient of the mean loss with respect to every tensor into it (same names, shapes and
// order as `model`). Errors: as ValidateCnnModel; INVALID_ARGUMENT for rows <= 0 or a label
// outside [0, 10).
absl::StatusOr<double> CnnLossAndGradient(const v1::Model& model, const float* x, const int* labels,
                                          int rows, float* per_sample_losses, v1::Model* gradient);

// Logits [rows, 10] row-major of `rows` images at `x` into `logits` (resized). Errors: as
// ValidateCnnModel; INVALID_ARGUMENT for rows <= 0.
absl::Status CnnLogits(const v1::Model& model, const float* x, int rows,
                       std::vector<float>* logits);

// The Trainer for this network: minibatch SGD on the batch-mean loss with the FedProx term,
//   w <- w - lr * (grad + mu * (w - w_global))
// exactly as ReferenceTrainer does for the dense models (models/reference_model.h), over
// samples in the encoding of models/samples.h. ReferenceTrainer hands a CNN model to it, so
// the SDK, the server and the simulator select the CNN with ModelConfig.architecture "cnn".
// Errors: those of ReferenceTrainer::Train (a null or mis-shaped global model, empty
// sample_ids, batch_size <= 0, learning_rate not finite and > 0, proximal_mu not finite and
// >= 0, a non-finite loss or weight), and the sample source's.
class CnnTrainer : public Trainer {
 public:
  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource& samples) override;
};

}  // namespace fedsched

#endif  // FEDSCHED_MODELS_CNN_H_

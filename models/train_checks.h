// Checks shared by the reference trainers (ReferenceTrainer in models/reference_model.h and
// CnnTrainer in models/cnn.h): the request's arguments before training and the weights after.
#ifndef FEDSCHED_MODELS_TRAIN_CHECKS_H_
#define FEDSCHED_MODELS_TRAIN_CHECKS_H_

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "fedsched/v1/tensor.pb.h"
#include "models/trainer.h"

namespace fedsched {

// Errors: INVALID_ARGUMENT if request.global is null, sample_ids is empty, batch_size <= 0,
// learning_rate is not finite and > 0, or proximal_mu is not finite and >= 0.
inline absl::Status CheckTrainRequest(const TrainRequest& request) {
  if (request.global == nullptr) {
    return absl::InvalidArgumentError("Train: TrainRequest.global is null");
  }
  if (request.sample_ids.empty()) {
    return absl::InvalidArgumentError("Train: TrainRequest.sample_ids is empty");
  }
  if (request.batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Train: batch_size must be > 0, got %d", request.batch_size));
  }
  if (!(request.learning_rate > 0.0f) || !std::isfinite(request.learning_rate)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Train: learning_rate must be finite and > 0, got %g", request.learning_rate));
  }
  if (!(request.proximal_mu >= 0.0f) || !std::isfinite(request.proximal_mu)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Train: proximal_mu must be finite and >= 0, got %g", request.proximal_mu));
  }
  return absl::OkStatus();
}

// Errors: INVALID_ARGUMENT naming the first tensor of `trained` with a non-finite value (and
// `learning_rate`, the usual cause).
inline absl::Status CheckTrainedFinite(const v1::Model& trained, float learning_rate) {
  for (const v1::Tensor& t : trained.tensors()) {
    for (float v : t.data()) {
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("Train: tensor \"%s\" became non-finite (learning rate %g too high?)",
                            t.name(), learning_rate));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace fedsched

#endif  // FEDSCHED_MODELS_TRAIN_CHECKS_H_

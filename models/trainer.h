// The interface between the SDK and the app's own training code.
#ifndef FEDSCHED_CLIENT_SDK_TRAINER_H_
#define FEDSCHED_CLIENT_SDK_TRAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched {

// Where a trainer gets the bytes of a local sample. The SDK hands the trainer its sample cache
// (client/cache), so a read is served from RAM on a hit and from the device's storage on a miss.
// Not thread-safe; one trainer uses it at a time.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Number of local samples; valid ids are [0, NumSamples()).
  virtual int64_t NumSamples() const = 0;
  // The encoded sample `id`. The view stays valid until the next Read call.
  // Errors: OUT_OF_RANGE for a bad id; DATA_LOSS / NOT_FOUND when storage fails.
  virtual absl::StatusOr<std::string_view> Read(int64_t id) = 0;
};

// One round's local training work, as planned by the server and the on-device cache.
struct TrainRequest {
  // The global model downloaded for this task (not owned).
  const v1::Model* global = nullptr;
  // Local sample ids in training order, length = batch_size * local_steps (ids may repeat:
  // the cache replicates hits, FedCaSe section 4). Minibatch b is ids [b*batch, (b+1)*batch).
  std::vector<int64_t> sample_ids;
  int32_t batch_size = 32;
  float learning_rate = 0.05f;
  // FedProx proximal coefficient mu (Li et al. 2020): adds (mu/2)||w - w_global||^2.
  float proximal_mu = 0.0f;
};

// What local training produced.
struct TrainResult {
  // Trained weights: same tensor names and shapes as TrainRequest::global.
  v1::Model trained;
  // Examples processed (= sample_ids.size()).
  int64_t num_examples = 0;
  // Mean training loss over all processed examples.
  double mean_loss = 0.0;
  // Per-sample loss aligned with TrainRequest::sample_ids (computed in the forward pass before
  // the step). Stays on the device: only aggregates are uploaded.
  std::vector<float> per_sample_losses;
};

// A client-side evaluation of the global model on the device's local eval split
// (docs/ARCHITECTURE.md "Client-side evaluation"). Only these aggregates leave the device.
struct EvalReport {
  // Examples evaluated, > 0.
  int64_t num_examples = 0;
  // Fraction classified correctly, in [0, 1].
  double accuracy = 0.0;
  // Mean loss, nats per example, >= 0.
  double mean_loss = 0.0;
};

// The app implements this; fedsched ships a reference implementation in models.
class Trainer {
 public:
  virtual ~Trainer() = default;
  // Evaluates `global` (the downloaded model, before training) on the local eval split, when the
  // server asks for it (Task.evaluate, EvalConfig.mode CLIENT). Default: UNIMPLEMENTED (the
  // client then reports no evaluation). Other errors are logged; the task still trains.
  virtual absl::StatusOr<EvalReport> Evaluate(const v1::Model& global) {
    return absl::UnimplementedError("this trainer has no local evaluation");
  }
  // Trains from `request.global` over `request.sample_ids` read through `samples`.
  // Errors: INVALID_ARGUMENT when the model does not match the trainer's architecture;
  // whatever `samples` returns on a failed read.
  virtual absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource& samples) = 0;
  // The trainer's own accounting of the peak memory, in bytes, that training `request` needs
  // (weights, gradients, optimiser state, activations of one minibatch, per-example
  // bookkeeping; docs/guides/RESOURCE_FIT.md). 0 = the trainer does not account (the SDK then
  // measures resident-set growth). Must not train.
  virtual int64_t PeakMemoryBytes(const TrainRequest& request) const { return 0; }
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_SDK_TRAINER_H_

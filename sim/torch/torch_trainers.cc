#include "sim/torch/torch_trainers.h"

#include "absl/strings/str_cat.h"
#include "models/cnn.h"
#include "models/torch/torch_trainer.h"
#include "sim/engine/training_learner.h"

namespace fedsched::sim {

absl::StatusOr<std::unique_ptr<Trainer>> MakeSimTrainer(const v1::SimConfig& config) {
  if (config.trainer() != kTorchTrainer) return MakeBuiltinTrainer(config);
  if (config.server().model().architecture() != kCnnArchitecture) {
    return absl::InvalidArgumentError(
        absl::StrCat("sim config: trainer \"torch\" trains the \"cnn\" architecture only; "
                     "server.model.architecture is \"",
                     config.server().model().architecture(), "\""));
  }
  // One intra-op thread per trainer: the simulator runs train_threads trainers side by side,
  // and a single thread keeps every task's update bit-reproducible.
  absl::StatusOr<std::unique_ptr<TorchTrainer>> t =
      TorchTrainer::Create({.model = "cnn", .threads = 1, .reference_layout = true});
  if (!t.ok()) return t.status();
  return std::unique_ptr<Trainer>(*std::move(t));
}

}  // namespace fedsched::sim

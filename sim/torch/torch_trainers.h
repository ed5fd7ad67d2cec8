// The simulator's trainers with LibTorch (docs/guides/SIMULATION.md "Trainers"): SimConfig.trainer
// "torch" trains the "cnn" architecture (models/cnn.h, LeCun et al. 1998 with ReLU and max
// pooling) with the LibTorch trainer of models/torch in models/cnn.h's tensor layout, so that
// initial weights, aggregation and test-set evaluation stay those of the reference CNN and only
// the local SGD steps run in LibTorch. Built only with libtorch-dev (sim/torch/CMakeLists.txt);
// fedsched-sim links it then, and sim_engine never does.
#ifndef FEDSCHED_SIM_TORCH_TORCH_TRAINERS_H_
#define FEDSCHED_SIM_TORCH_TORCH_TRAINERS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "fedsched/v1/sim.pb.h"
#include "models/trainer.h"

namespace fedsched::sim {

// A sim::TrainerFactory: "torch" is a TorchTrainer (one intra-op thread, reference layout), any
// other kind MakeBuiltinTrainer's. Errors: INVALID_ARGUMENT for "torch" with a
// server.model.architecture other than "cnn"; MakeBuiltinTrainer's.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Trainer>> MakeSimTrainer(const v1::SimConfig& config);

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_TORCH_TORCH_TRAINERS_H_

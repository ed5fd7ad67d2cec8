// What a client masks for a model update (docs/guides/SECURE_AGGREGATION.md "Weights" and "Over the
// wire"): the update as one flat vector and the FedAvg weight it is scaled by before the clip
// (Bonawitz et al., CCS 2017, section 4, masks one vector per client; FedAvg's weight n_k / n of
// McMahan et al., AISTATS 2017, is applied on the client because the server sees only the sum).
// The SDK (client/sdk/client_secagg.cc) and the simulator (sim/engine/simulator_secagg.cc) both
// build their masked input from these, so the two mask the same vector.
#ifndef FEDSCHED_SECAGG_UPDATE_VECTOR_H_
#define FEDSCHED_SECAGG_UPDATE_VECTOR_H_

#include <cstdint>
#include <vector>

#include "fedsched/v1/tensor.pb.h"

namespace fedsched::secagg {

// `update`'s values, tensor after tensor in the model's order (the round engine reshapes the
// unmasked sum the same way, RoundEngine::FoldUnmaskedSum). Length: the sum of the tensors'
// data sizes (SecAggRoundParams.vector_length for a delta of the round's model).
std::vector<float> FlattenUpdate(const fedsched::v1::Model& update);

// The FedAvg weight in [0, 1] a client applies before masking: min(1, num_examples /
// example_scale), or 1 when example_scale is 0 (uniform weights, as under differential
// privacy; SecAggTask.example_scale). `num_examples` >= 0.
double MaskWeight(int64_t num_examples, int64_t example_scale);

}  // namespace fedsched::secagg

#endif  // FEDSCHED_SECAGG_UPDATE_VECTOR_H_

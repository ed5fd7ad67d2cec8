// Named-tensor models (docs/ARCHITECTURE.md "Named-tensor models"): a model is whatever list of
// named float32 tensors a trainer provides (v1::Model, proto/fedsched/v1/tensor.proto), not one
// of the reference architectures. The server runs such a model without knowing its layers: it
// takes the initial weights from a file the trainer exports, checks every update against their
// names and shapes, averages them, and leaves evaluation to the clients (EvalConfig.mode CLIENT).
//
// Model file format: one binary-serialized fedsched.v1.Model message (tensors with name, shape
// [dims] and row-major float32 data), nothing else; the Python bindings write it with
// fedsched.save_model and the C++ side with SaveModelFile.
#ifndef FEDSCHED_MODELS_NAMED_MODEL_H_
#define FEDSCHED_MODELS_NAMED_MODEL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched {

// Largest model file LoadModelFile reads, bytes (1 GiB: protobuf's message limit is 2 GiB).
inline constexpr int64_t kMaxModelFileBytes = int64_t{1} << 30;

// OK iff `model` is a usable named-tensor model: at least one tensor, every name non-empty and
// unique, every dimension >= 1, data_size() == product(shape) (an empty shape is a scalar), and
// every value finite. Errors: INVALID_ARGUMENT naming the first offending tensor.
absl::Status ValidateNamedTensors(const v1::Model& model);

// OK iff `model` has exactly the tensors of `reference` (same names, any order) with the same
// shapes. Errors: INVALID_ARGUMENT naming the missing, unexpected or mis-shaped tensor.
absl::Status CheckSameTensors(const v1::Model& reference, const v1::Model& model);

// Reads a model file (format in the file comment) and validates it (ValidateNamedTensors).
// Errors: NOT_FOUND / PERMISSION_DENIED from reading, INVALID_ARGUMENT when the file is larger
// than kMaxModelFileBytes, does not parse as a fedsched.v1.Model, or fails validation; every
// message names the path.
absl::StatusOr<v1::Model> LoadModelFile(const std::string& path);

// Writes `model` to `path` (format in the file comment), replacing it atomically (a temporary
// file renamed over it). Errors: INTERNAL naming the path when it cannot be written.
absl::Status SaveModelFile(const v1::Model& model, const std::string& path);

// True iff `config` describes a named-tensor model: initial weights from a file and no reference
// architecture (the server cannot run it; docs/ARCHITECTURE.md "Named-tensor models").
bool IsNamedTensorModel(const v1::ModelConfig& config);

}  // namespace fedsched

#endif  // FEDSCHED_MODELS_NAMED_MODEL_H_

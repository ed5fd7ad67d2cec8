// Downlink compression: the model sent as a compressed delta from the version a device holds.
// Lossy formats make the device's copy differ from the server's model, so the server tracks what
// the device holds by applying the same payload to its own copy of that version (ApplyDelta is
// deterministic), and the next delta starts from there.
#ifndef FEDSCHED_COMMON_COMPRESS_DELTA_H_
#define FEDSCHED_COMMON_COMPRESS_DELTA_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/compress/encode.h"
#include "common/compress/rng.h"
#include "fedsched/v1/compressed.pb.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched::compress {

// Encode(model_new - model_held, spec, rng) for one tensor. InvalidArgument if the sizes differ,
// or the encoder's errors (a non-finite difference included).
[[nodiscard]] absl::StatusOr<v1::CompressedTensor> EncodeDelta(absl::Span<const float> model_new,
                                                               absl::Span<const float> model_held,
                                                               const CompressionSpec& spec,
                                                               Rng& rng);

// model += decode(delta), on the device (or on the server's copy of what the device holds).
// Errors: Fold's (the payload is checked against model.size() first; nothing is written then).
[[nodiscard]] absl::Status ApplyDelta(const v1::CompressedTensor& delta, absl::Span<float> model);

// EncodeDelta per tensor, matched by name; the payloads carry the new model's names and shapes,
// in its order. InvalidArgument if a tensor of `model_new` is missing from `model_held` or has
// another element count, or an encoder error.
[[nodiscard]] absl::StatusOr<v1::CompressedModel> EncodeModelDelta(const v1::Model& model_new,
                                                                   const v1::Model& model_held,
                                                                   const CompressionSpec& spec,
                                                                   Rng& rng);

// ApplyDelta per tensor, matched by name. InvalidArgument if the delta names a tensor `model`
// lacks, names one twice, or does not cover every tensor of `model`, or a payload is malformed;
// `model` is unchanged when the names or a payload's sizes are wrong.
[[nodiscard]] absl::Status ApplyModelDelta(const v1::CompressedModel& delta, v1::Model* model);

// ApplyModelDelta of each delta of `chain` in order, to `model`, the model of version
// chain.from_version (the downlink's shadow chain, docs/ALGORITHMS.md): the result is the model of
// chain.to_version, bit for bit as the server built it. Errors: InvalidArgument naming the delta
// (ApplyModelDelta's); `model` may then be partly updated: a caller that must keep it applies
// the chain to a copy.
[[nodiscard]] absl::Status ApplyModelDeltaChain(const v1::ModelDeltaChain& chain, v1::Model* model);

}  // namespace fedsched::compress

#endif  // FEDSCHED_COMMON_COMPRESS_DELTA_H_

// Whole-update compression as the round uses it: the wire spec (v1::UpdateCompression) turned into
// a codec spec, a float32 update delta compressed tensor by tensor (with error feedback when the
// spec asks for it), and the upload size a spec gives a model, which the planner charges at a
// device's bandwidth. Shared by the client SDK (what a device uploads) and the simulator (what its
// simulated devices upload), so that both send the same bits for the same update and seed.
#ifndef FEDSCHED_COMMON_COMPRESS_UPDATE_CODEC_H_
#define FEDSCHED_COMMON_COMPRESS_UPDATE_CODEC_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/compress/encode.h"
#include "common/compress/error_feedback.h"
#include "common/compress/rng.h"
#include "fedsched/v1/compressed.pb.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched::compress {

// True when `c` asks for no compression (FORMAT_UNSPECIFIED or FLOAT32): the update then travels
// as a float32 Model, as without compression.
bool IsUncompressed(const v1::UpdateCompression& c);

// The codec spec of `c` with the proto's defaults for unset fields (bits 8, block 256, top-k
// fraction 0.01; FORMAT_UNSPECIFIED = FLOAT32). Errors: InvalidArgument naming the field out of
// range (CompressionSpec::Validate), or TOPK without error_feedback (top-k is biased).
[[nodiscard]] absl::StatusOr<CompressionSpec> SpecFrom(const v1::UpdateCompression& c);

// A short human name of `c` for logs, CSVs and selection reasons: "float32", "fp16",
// "qsgd8/256", "topk0.01+ef", "hadamard1/256"; "+ef" marks error feedback.
std::string Describe(const v1::UpdateCompression& c);

// Compresses every tensor of `delta` (trained minus downloaded weights) with `c`, in the delta's
// order, names and shapes kept. With c.error_feedback and a non-null `ef`, each tensor goes
// through ef->Compress (its residual added first and the new residual kept); otherwise the plain
// encoder runs. `rng` drives the stochastic formats: seed it from the OS on a device, from the
// run's seed in the simulator. Errors: SpecFrom's; the encoder's (a non-finite value names the
// tensor); ErrorFeedback's (a residual of another size). `ef` is unchanged on error only for the
// tensor that failed: a caller that must keep it whole compresses a copy.
[[nodiscard]] absl::StatusOr<v1::CompressedModel> CompressModel(const v1::Model& delta,
                                                                const v1::UpdateCompression& c,
                                                                ErrorFeedback* ef, Rng& rng);

// The serialized size, bytes, of an update of a model with these tensors' element counts
// compressed with `c` (c assumed valid: SpecFrom): exact for FLOAT32, FP16, QSGD and
// HADAMARD_1BIT up to the per-tensor header (name and shape, counted from `model`), and for TOPK
// the expected size (4-byte values plus 1-3 byte varint index gaps estimated at 3 bytes). What
// the planner's round-time prediction charges at a device's upload bandwidth. `model` may carry
// no data: only names and shapes are read (a scalar is one element).
int64_t CompressedUpdateBytes(const v1::Model& model, const v1::UpdateCompression& c);

}  // namespace fedsched::compress

#endif  // FEDSCHED_COMMON_COMPRESS_UPDATE_CODEC_H_

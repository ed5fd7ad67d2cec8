// The downlink's shadow chain (CompressionConfig.downlink; docs/ALGORITHMS.md, "The shadow
// chain"): what devices download when the model travels as compressed deltas. A lossy delta would
// make each device's copy drift from the server's model, so the server keeps one shadow model
// that every device holds bit for bit instead of per-device state:
//   shadow_0 = the model the chain starts at (the initial model, or the restored one on resume);
//   D_v = encode(model_v - shadow_prev) with the downlink compressor, seeded from the run's seed
//   and v; shadow_v = shadow_prev + decode(D_v) (compress::ApplyModelDelta, deterministic).
// model_v - shadow_v is carried into the next delta (error feedback on the server). Devices train
// from shadow_v; their updates fold into model_v as without compression. A device holding
// shadow_h of one of the last `versions_kept` versions gets the chain D_(h+1)..D_v when its
// serialization is smaller than the whole shadow_v's. Pure: no clock, disk or thread.
#ifndef FEDSCHED_SERVER_ROUND_SHADOW_CHAIN_H_
#define FEDSCHED_SERVER_ROUND_SHADOW_CHAIN_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/compress/encode.h"
#include "fedsched/v1/compressed.pb.h"
#include "fedsched/v1/config.pb.h"
#include "fedsched/v1/tensor.pb.h"
#include "server/round/model_versions.h"

namespace fedsched::round {

// Versions whose deltas the chain keeps when CompressionConfig.downlink_versions_kept is 0.
inline constexpr int32_t kDefaultDownlinkVersionsKept = 8;

// True when `config.compression().downlink` asks for compressed deltas (not FLOAT32 / unset).
bool DownlinkCompressed(const v1::ServerConfig& config);

// Checks the downlink part of `config.compression()`: InvalidArgument naming the field
// (compression.downlink.<field> as compress::SpecFrom says, or downlink_versions_kept < 0).
[[nodiscard]] absl::Status ValidateDownlink(const v1::ServerConfig& config);

// What a task downloads (ShadowChain::PlanDownload).
struct DownloadPlan {
  // The version the chain starts from, or -1 for the whole shadow model.
  int64_t from_version = -1;
  // Serialized bytes of the payload: the ModelDeltaChain, or the whole shadow model.
  int64_t bytes = 0;
  bool delta() const { return from_version >= 0; }
};

// Not thread-safe (the engine's owner serialises calls).
class ShadowChain {
 public:
  // `spec_wire` is config.compression().downlink (compressed: DownlinkCompressed), `seed` the
  // run's seed, `versions_kept` > 0; the chain starts at `version` with shadow = `model`.
  // `make_blobs`: keep the serialized shadow and its SHA-256 (the server; the simulator only
  // needs sizes). Errors: InvalidArgument from compress::SpecFrom or for versions_kept <= 0.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ShadowChain>> Create(
      const v1::UpdateCompression& spec_wire, uint64_t seed, int32_t versions_kept, int64_t version,
      const v1::Model& model, bool make_blobs);
  ShadowChain(const ShadowChain&) = delete;
  ShadowChain& operator=(const ShadowChain&) = delete;

  // Moves the chain to committed `version` (> version()) whose server model is `model`: encodes
  // D = model - shadow, applies it to the shadow, keeps D (dropping the oldest beyond
  // versions_kept). Errors: FailedPrecondition for a version not above version(); the encoder's
  // InvalidArgument (a tensor missing or resized, a non-finite difference): nothing changes then.
  [[nodiscard]] absl::Status Advance(int64_t version, const v1::Model& model);

  // The version of the current shadow, and the shadow model (what devices train from).
  int64_t version() const { return version_; }
  const std::shared_ptr<const v1::Model>& shadow() const { return shadow_; }
  // The shadow's serialization and raw SHA-256 (null unless make_blobs).
  const std::shared_ptr<const ModelBlob>& shadow_blob() const { return shadow_blob_; }
  // Serialized size of the shadow model, bytes.
  int64_t full_bytes() const { return full_bytes_; }

  // What a device holding version `held_version` (-1: none) downloads: the chain from it when
  // held_version is in [version() - versions_kept, version()], its SHA-256 `held_sha256` matches
  // that shadow's (not checked when empty, or without make_blobs: the simulator's devices hold
  // exactly what they were sent), and the chain's serialization is smaller than the whole
  // shadow's and not empty; else the whole shadow (from_version -1).
  DownloadPlan PlanDownload(int64_t held_version, const std::string& held_sha256) const;

  // The serialized ModelDeltaChain from `from_version` to version() with its SHA-256, built once
  // per (from_version, version()) and kept until the next Advance. Errors: OutOfRange when
  // from_version is not in [version() - kept deltas, version()].
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const ModelBlob>> ChainBlob(int64_t from_version);

  // The chain itself (tests, tools). Same errors as ChainBlob.
  [[nodiscard]] absl::StatusOr<v1::ModelDeltaChain> Chain(int64_t from_version) const;

 private:
  struct Step {
    int64_t from_version = 0;
    int64_t to_version = 0;
    v1::CompressedModel delta;
    int64_t bytes = 0;   // delta.ByteSizeLong()
    std::string sha256;  // of shadow_(to_version)'s serialization (make_blobs only)
  };
  ShadowChain(compress::CompressionSpec spec, uint64_t seed, int32_t versions_kept,
              bool make_blobs);
  // Index in steps_ of the first delta after `from_version`, or -1 when out of reach.
  int64_t FirstStep(int64_t from_version) const;
  int64_t ChainBytes(int64_t from_version) const;
  void SetShadow(std::shared_ptr<v1::Model> shadow);

  compress::CompressionSpec spec_;
  uint64_t seed_ = 0;
  int32_t versions_kept_ = kDefaultDownlinkVersionsKept;
  bool make_blobs_ = false;
  int64_t version_ = 0;
  int64_t oldest_version_ = 0;  // the earliest version a chain can start from
  std::string oldest_sha256_;   // its shadow's SHA-256 (make_blobs only)
  std::shared_ptr<const v1::Model> shadow_;
  std::shared_ptr<const ModelBlob> shadow_blob_;
  int64_t full_bytes_ = 0;
  std::deque<Step> steps_;  // consecutive: steps_[i].to_version == steps_[i + 1].from_version
  absl::flat_hash_map<int64_t, std::shared_ptr<const ModelBlob>> chain_blobs_;  // by from_version
};

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_SHADOW_CHAIN_H_

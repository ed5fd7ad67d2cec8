#include "server/round/shadow_chain.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/compress/delta.h"
#include "common/compress/rng.h"
#include "common/compress/update_codec.h"
#include "common/sha256.h"
#include "google/protobuf/io/coded_stream.h"

namespace fedsched::round {
namespace {

// Bytes of a protobuf varint holding `v`.
int64_t VarintBytes(uint64_t v) {
  return static_cast<int64_t>(google::protobuf::io::CodedOutputStream::VarintSize64(v));
}

// The downlink's spec: the shadow chain is itself error feedback (what a delta leaves out is in
// the next one), so TOPK needs no device-side residual here.
absl::StatusOr<compress::CompressionSpec> DownlinkSpec(const v1::UpdateCompression& wire) {
  v1::UpdateCompression c = wire;
  if (c.format() == v1::CompressedTensor::TOPK) c.set_error_feedback(true);
  return compress::SpecFrom(c);
}

// The seed of version `version`'s delta: the run's seed and the version, through splitmix64 in
// Rng, apart from the seeds the uplink draws (a distinct constant).
uint64_t DeltaSeed(uint64_t seed, int64_t version) {
  return seed ^ (0xd0a1c4b3e2f56789ULL + static_cast<uint64_t>(version) * 0x9e3779b97f4a7c15ULL);
}

}  // namespace

bool DownlinkCompressed(const v1::ServerConfig& config) {
  return config.has_compression() && !compress::IsUncompressed(config.compression().downlink());
}

absl::Status ValidateDownlink(const v1::ServerConfig& config) {
  if (config.compression().downlink_versions_kept() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compression.downlink_versions_kept must be >= 0 (0 = the default ",
        kDefaultDownlinkVersionsKept, "), got ", config.compression().downlink_versions_kept()));
  }
  if (!DownlinkCompressed(config)) return absl::OkStatus();
  absl::StatusOr<compress::CompressionSpec> spec = DownlinkSpec(config.compression().downlink());
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("compression.downlink: ", spec.status().message()));
  }
  return absl::OkStatus();
}

ShadowChain::ShadowChain(compress::CompressionSpec spec, uint64_t seed, int32_t versions_kept,
                         bool make_blobs)
    : spec_(spec), seed_(seed), versions_kept_(versions_kept), make_blobs_(make_blobs) {}

absl::StatusOr<std::unique_ptr<ShadowChain>> ShadowChain::Create(
    const v1::UpdateCompression& spec_wire, uint64_t seed, int32_t versions_kept, int64_t version,
    const v1::Model& model, bool make_blobs) {
  absl::StatusOr<compress::CompressionSpec> spec = DownlinkSpec(spec_wire);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("compression.downlink: ", spec.status().message()));
  }
  if (versions_kept <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shadow chain: versions_kept must be > 0, got ", versions_kept));
  }
  std::unique_ptr<ShadowChain> chain(new ShadowChain(*spec, seed, versions_kept, make_blobs));
  chain->version_ = version;
  chain->oldest_version_ = version;
  chain->SetShadow(std::make_shared<v1::Model>(model));
  if (make_blobs) chain->oldest_sha256_ = chain->shadow_blob_->sha256;
  return chain;
}

void ShadowChain::SetShadow(std::shared_ptr<v1::Model> shadow) {
  full_bytes_ = static_cast<int64_t>(shadow->ByteSizeLong());
  if (make_blobs_) {
    auto blob = std::make_shared<ModelBlob>();
    blob->bytes = shadow->SerializeAsString();
    blob->sha256 = Sha256(blob->bytes);
    shadow_blob_ = std::move(blob);
  }
  shadow_ = std::move(shadow);
  chain_blobs_.clear();
}

absl::Status ShadowChain::Advance(int64_t version, const v1::Model& model) {
  if (version <= version_) {
    return absl::FailedPreconditionError(
        absl::StrCat("shadow chain: version ", version, " is not above ", version_));
  }
  compress::Rng rng(DeltaSeed(seed_, version));
  absl::StatusOr<v1::CompressedModel> delta =
      compress::EncodeModelDelta(model, *shadow_, spec_, rng);
  if (!delta.ok()) return delta.status();
  // Copy-on-write: downloads in flight may still hold the previous shadow.
  auto next = std::make_shared<v1::Model>(*shadow_);
  if (absl::Status s = compress::ApplyModelDelta(*delta, next.get()); !s.ok()) return s;
  Step step;
  step.from_version = version_;
  step.to_version = version;
  step.bytes = static_cast<int64_t>(delta->ByteSizeLong());
  step.delta = *std::move(delta);
  version_ = version;
  SetShadow(std::move(next));
  if (make_blobs_) step.sha256 = shadow_blob_->sha256;
  steps_.push_back(std::move(step));
  while (static_cast<int64_t>(steps_.size()) > versions_kept_) {
    oldest_version_ = steps_.front().to_version;
    oldest_sha256_ = std::move(steps_.front().sha256);
    steps_.pop_front();
  }
  return absl::OkStatus();
}

int64_t ShadowChain::FirstStep(int64_t from_version) const {
  if (from_version == oldest_version_) return 0;
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].to_version == from_version) return static_cast<int64_t>(i) + 1;
  }
  return -1;
}

int64_t ShadowChain::ChainBytes(int64_t from_version) const {
  int64_t bytes = 0;
  if (from_version != 0) bytes += 1 + VarintBytes(static_cast<uint64_t>(from_version));
  if (version_ != 0) bytes += 1 + VarintBytes(static_cast<uint64_t>(version_));
  for (size_t i = static_cast<size_t>(FirstStep(from_version)); i < steps_.size(); ++i) {
    bytes += 1 + VarintBytes(static_cast<uint64_t>(steps_[i].bytes)) + steps_[i].bytes;
  }
  return bytes;
}

DownloadPlan ShadowChain::PlanDownload(int64_t held_version, const std::string& held_sha256) const {
  DownloadPlan whole{.from_version = -1, .bytes = full_bytes_};
  if (held_version < 0) return whole;
  const int64_t first = FirstStep(held_version);
  if (first < 0) return whole;
  if (make_blobs_ && !held_sha256.empty()) {
    const std::string& expected =
        first == 0 ? oldest_sha256_ : steps_[static_cast<size_t>(first) - 1].sha256;
    if (expected != held_sha256) return whole;
  }
  const int64_t bytes = ChainBytes(held_version);
  // An empty chain (held version 0 = the current version 0) serializes to no bytes at all, which a
  // download cannot announce: the whole model then.
  if (bytes == 0 || bytes >= full_bytes_) return whole;
  return DownloadPlan{.from_version = held_version, .bytes = bytes};
}

absl::StatusOr<v1::ModelDeltaChain> ShadowChain::Chain(int64_t from_version) const {
  const int64_t first = FirstStep(from_version);
  if (first < 0) {
    return absl::OutOfRangeError(absl::StrCat("shadow chain: no deltas from version ", from_version,
                                              " (kept from ", oldest_version_, " to ", version_,
                                              ")"));
  }
  v1::ModelDeltaChain chain;
  chain.set_from_version(from_version);
  chain.set_to_version(version_);
  for (size_t i = static_cast<size_t>(first); i < steps_.size(); ++i) {
    *chain.add_deltas() = steps_[i].delta;
  }
  return chain;
}

absl::StatusOr<std::shared_ptr<const ModelBlob>> ShadowChain::ChainBlob(int64_t from_version) {
  if (auto it = chain_blobs_.find(from_version); it != chain_blobs_.end()) return it->second;
  absl::StatusOr<v1::ModelDeltaChain> chain = Chain(from_version);
  if (!chain.ok()) return chain.status();
  auto blob = std::make_shared<ModelBlob>();
  blob->bytes = chain->SerializeAsString();
  blob->sha256 = Sha256(blob->bytes);
  chain_blobs_[from_version] = blob;
  return std::shared_ptr<const ModelBlob>(std::move(blob));
}

}  // namespace fedsched::round

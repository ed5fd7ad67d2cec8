#include "server/round/model_versions.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fedsched::round {

ModelVersions::ModelVersions(int64_t version, v1::Model model)
    : version_(version),
      model_mutable_(std::make_shared<v1::Model>(std::move(model))),
      model_(model_mutable_) {}

int64_t ModelVersions::VersionsSince(int64_t base_version) const {
  const int64_t base = base_version >= 0 ? base_version : published_version_;
  return std::max<int64_t>(0, version_ - base);
}

std::shared_ptr<v1::Model> ModelVersions::TakeBuffer() {
  std::shared_ptr<v1::Model> next = std::move(spare_);
  spare_.reset();
  if (next == nullptr || next.use_count() > 1) next = std::make_shared<v1::Model>();
  revertible_ = false;
  return next;
}

void ModelVersions::Commit(int64_t version, std::shared_ptr<v1::Model> next, bool revertible) {
  version_ = version;
  revertible_ = revertible;
  spare_ = std::move(model_mutable_);
  model_mutable_ = std::move(next);
  model_ = model_mutable_;
}

bool ModelVersions::CanRevert() const {
  return revertible_ && published_version_ < version_ && spare_ != nullptr;
}

void ModelVersions::Revert() {
  revertible_ = false;
  std::shared_ptr<v1::Model> rejected = std::move(model_mutable_);
  model_mutable_ = std::move(spare_);
  model_ = model_mutable_;
  spare_ = std::move(rejected);
  --version_;
}

absl::Status ModelVersions::Publish(int64_t version, std::shared_ptr<const v1::Model> model,
                                    std::shared_ptr<const ModelBlob> blob) {
  if (model == nullptr) return absl::InvalidArgumentError("Publish: null model");
  if (version <= published_version_ || version > version_) {
    return absl::FailedPreconditionError(absl::StrCat("Publish: version ", version, " is not in (",
                                                      published_version_, ", ", version_, "]"));
  }
  published_version_ = version;
  published_model_ = std::move(model);
  published_blob_ = std::move(blob);
  return absl::OkStatus();
}

}  // namespace fedsched::round

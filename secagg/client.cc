#include "secagg/client.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "secagg/packing.h"
#include "secagg/quantize.h"
#include "secagg/shamir.h"

namespace fedsched::secagg {

using fedsched::v1::SecAggAdvertise;
using fedsched::v1::SecAggKeyDirectory;
using fedsched::v1::SecAggMaskedInput;
using fedsched::v1::SecAggRoundParams;
using fedsched::v1::SecAggRoutedShares;
using fedsched::v1::SecAggShareKeys;
using fedsched::v1::SecAggSharePlaintext;
using fedsched::v1::SecAggUnmaskRequest;
using fedsched::v1::SecAggUnmaskResponse;

absl::StatusOr<SecAggClient> SecAggClient::Create(const SecAggRoundParams& params, uint32_t index,
                                                  const Bytes32& entropy, MemberIdentity identity) {
  FEDSCHED_ASSIGN_OR_RETURN(RoundSetup setup, ResolveParams(params));
  if (index >= params.cohort_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secagg client: index ", index, " is outside the cohort of ", params.cohort_size()));
  }
  return SecAggClient(std::move(setup), index, entropy, std::move(identity));
}

absl::Status SecAggClient::CheckStep(Step expected, absl::string_view name) const {
  if (step_ == expected) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("secagg client ", index_, ": ", name, " called out of order"));
}

absl::Status SecAggClient::CheckAddressed(uint64_t round_id, uint32_t recipient,
                                          absl::string_view what) const {
  FEDSCHED_RETURN_IF_ERROR(CheckRound(setup_.params.round_id(), round_id, what));
  if (recipient == index_) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("secagg client ", index_, ": ", what, " is addressed to ", recipient));
}

absl::StatusOr<SecAggAdvertise> SecAggClient::Advertise() {
  FEDSCHED_RETURN_IF_ERROR(CheckStep(Step::kAdvertise, "Advertise"));
  FEDSCHED_ASSIGN_OR_RETURN(cipher_keys_, X25519Key::FromPrivate(rng_.Next32()));
  FEDSCHED_ASSIGN_OR_RETURN(mask_keys_, X25519Key::FromPrivate(rng_.Next32()));
  self_seed_ = rng_.Next32();
  const uint64_t round = setup_.params.round_id();
  SecAggAdvertise out;
  out.set_round_id(round);
  out.set_sender(index_);
  out.set_cipher_public_key(ToString(cipher_keys_.public_key()));
  out.set_mask_public_key(ToString(mask_keys_.public_key()));
  out.set_self_seed_commitment(ToString(SelfSeedCommitment(round, index_, self_seed_)));
  FEDSCHED_RETURN_IF_ERROR(
      SignAdvertisement(setup_.params, identity_.signing_key, identity_.client_id, out));
  step_ = Step::kShareKeys;
  return out;
}

absl::Status SecAggClient::TakeAdvertisement(const SecAggAdvertise& peer) {
  const uint32_t j = peer.sender();
  if (j == index_ || j >= setup_.graph.size() || !setup_.graph.Adjacent(index_, j)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secagg client ", index_, ": key directory lists ", j, ", which is not a neighbour"));
  }
  FEDSCHED_RETURN_IF_ERROR(
      CheckRound(setup_.params.round_id(), peer.round_id(), "a neighbour's advertisement"));
  FEDSCHED_RETURN_IF_ERROR(FromBytes(peer.cipher_public_key(), "cipher_public_key").status());
  FEDSCHED_RETURN_IF_ERROR(FromBytes(peer.mask_public_key(), "mask_public_key").status());
  if (peers_.contains(j) ||
      std::find(unverified_.begin(), unverified_.end(), j) != unverified_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg client ", index_, ": key directory lists ", j, " twice"));
  }
  // Keys whose signature fails may be anyone's (a relay's, another member's): sealing shares
  // to them would hand this client's secrets to whoever substituted them. The neighbour is
  // treated as dropped, as for a share that does not authenticate, and reported.
  if (!VerifyAdvertisement(setup_.params, peer).ok()) {
    unverified_.push_back(j);
    return absl::OkStatus();
  }
  peers_.emplace(j, peer);
  return absl::OkStatus();
}

absl::StatusOr<SecAggShareKeys> SecAggClient::ShareKeys(const SecAggKeyDirectory& directory) {
  FEDSCHED_RETURN_IF_ERROR(CheckStep(Step::kShareKeys, "ShareKeys"));
  const uint64_t round = setup_.params.round_id();
  FEDSCHED_RETURN_IF_ERROR(
      CheckAddressed(directory.round_id(), directory.recipient(), "key directory"));
  for (const SecAggAdvertise& peer : directory.neighbours()) {
    FEDSCHED_RETURN_IF_ERROR(TakeAdvertisement(peer));
  }
  std::sort(unverified_.begin(), unverified_.end());
  const int t = static_cast<int>(setup_.params.threshold());
  // Holders: this client first, then its advertised neighbours in index order.
  std::vector<uint64_t> xs = {ShamirPoint(index_)};
  for (const auto& [j, peer] : peers_) xs.push_back(ShamirPoint(j));
  if (static_cast<int>(xs.size()) < t) {
    return absl::FailedPreconditionError(
        absl::StrCat("secagg client ", index_, ": ", xs.size(),
                     " share holders are left, fewer than the threshold ", t));
  }
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<Share> key_shares,
                            ShamirSplit(mask_keys_.private_key(), t, xs, rng_));
  FEDSCHED_ASSIGN_OR_RETURN(std::vector<Share> seed_shares, ShamirSplit(self_seed_, t, xs, rng_));
  SecAggShareKeys out;
  out.set_round_id(round);
  out.set_sender(index_);
  out.mutable_unverified_advertisers()->Add(unverified_.begin(), unverified_.end());
  size_t h = 0;
  for (uint64_t x : xs) {
    const uint32_t receiver = static_cast<uint32_t>(x - 1);
    SecAggSharePlaintext plain;
    plain.set_round_id(round);
    plain.set_sender(index_);
    plain.set_receiver(receiver);
    plain.mutable_mask_key_share()->Add(key_shares[h].values.begin(), key_shares[h].values.end());
    plain.mutable_self_seed_share()->Add(seed_shares[h].values.begin(),
                                         seed_shares[h].values.end());
    ++h;
    if (receiver == index_) {
      held_[index_] = std::move(plain);
      continue;
    }
    FEDSCHED_ASSIGN_OR_RETURN(Bytes32 peer_key,
                              FromBytes(peers_[receiver].cipher_public_key(), "cipher key"));
    FEDSCHED_ASSIGN_OR_RETURN(Bytes32 key,
                              ShareKey(cipher_keys_, peer_key, round, index_, receiver));
    share_keys_[receiver] = key;
    FEDSCHED_ASSIGN_OR_RETURN(std::string sealed,
                              AesGcmSeal(key, ShareNonce(index_), plain.SerializeAsString(),
                                         ShareAad(round, index_, receiver)));
    auto* share = out.add_shares();
    share->set_sender(index_);
    share->set_receiver(receiver);
    share->set_ciphertext(std::move(sealed));
  }
  step_ = Step::kMaskInput;
  return out;
}

absl::Status SecAggClient::OpenShares(const SecAggRoutedShares& routed) {
  const uint64_t round = setup_.params.round_id();
  FEDSCHED_RETURN_IF_ERROR(CheckAddressed(routed.round_id(), routed.recipient(), "routed shares"));
  for (const auto& share : routed.shares()) {
    const uint32_t j = share.sender();
    if (!share_keys_.contains(j) || share.receiver() != index_) {
      return absl::InvalidArgumentError(
          absl::StrCat("secagg client ", index_, ": a share from ", j, " to ", share.receiver(),
                       " was routed here (not an advertised neighbour's)"));
    }
    if (held_.contains(j) ||
        std::find(unauthenticated_.begin(), unauthenticated_.end(), j) != unauthenticated_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("secagg client ", index_, ": two shares from ", j));
    }
    // The key was agreed when this client sealed its own share for j (same unordered pair).
    absl::StatusOr<std::string> plain_bytes =
        AesGcmOpen(share_keys_.at(j), share.ciphertext(), ShareAad(round, j, index_));
    SecAggSharePlaintext plain;
    if (!plain_bytes.ok() || !plain.ParseFromString(*plain_bytes) || plain.round_id() != round ||
        plain.sender() != j || plain.receiver() != index_ ||
        plain.mask_key_share_size() != kChunksPerSecret ||
        plain.self_seed_share_size() != kChunksPerSecret) {
      // Forged, tampered, replayed or misrouted: j is treated as dropped here (no mask with it,
      // no share of it held) and reported, so that the server leaves it out for everyone
      // instead of this client aborting the round.
      unauthenticated_.push_back(j);
      continue;
    }
    held_[j] = std::move(plain);
    maskers_.push_back(j);
  }
  std::sort(maskers_.begin(), maskers_.end());
  const uint32_t t = setup_.params.threshold();
  if (maskers_.size() + 1 < t) {
    return absl::FailedPreconditionError(
        absl::StrCat("secagg client ", index_, ": ", maskers_.size() + 1,
                     " share holders completed key sharing, fewer than the threshold ", t));
  }
  return absl::OkStatus();
}

absl::Status SecAggClient::AddMasks(absl::Span<uint32_t> vector) const {
  const uint64_t round = setup_.params.round_id();
  FEDSCHED_RETURN_IF_ERROR(AddPrgMask(self_seed_, +1, vector));
  for (uint32_t j : maskers_) {
    FEDSCHED_ASSIGN_OR_RETURN(Bytes32 peer_key,
                              FromBytes(peers_.at(j).mask_public_key(), "mask key"));
    FEDSCHED_ASSIGN_OR_RETURN(Bytes32 seed, PairwiseSeed(mask_keys_, peer_key, round, index_, j));
    FEDSCHED_RETURN_IF_ERROR(AddPrgMask(seed, PairSign(index_, j), vector));
  }
  return absl::OkStatus();
}

absl::StatusOr<SecAggMaskedInput> SecAggClient::MaskInput(const SecAggRoutedShares& routed,
                                                          absl::Span<const float> update,
                                                          double weight,
                                                          std::vector<uint32_t>* quantized) {
  FEDSCHED_RETURN_IF_ERROR(CheckStep(Step::kMaskInput, "MaskInput"));
  step_ = Step::kDone;  // any failure below ends this client's part in the round
  if (update.size() != setup_.params.vector_length()) {
    return absl::InvalidArgumentError(absl::StrCat("secagg client ", index_, ": update has ",
                                                   update.size(), " elements, the round ",
                                                   setup_.params.vector_length()));
  }
  FEDSCHED_RETURN_IF_ERROR(OpenShares(routed));
  SecAggMaskedInput out;
  out.set_round_id(setup_.params.round_id());
  out.set_sender(index_);
  if (setup_.bits == kFullBits) {
    // Z_2^32: round to nearest, straight into the message's fixed32 elements.
    out.mutable_masked()->Resize(static_cast<int>(update.size()), 0);
    absl::Span<uint32_t> vector(out.mutable_masked()->mutable_data(), update.size());
    FEDSCHED_RETURN_IF_ERROR(
        ClipAndQuantize(update, weight, setup_.params.clip_norm(), setup_.scale, vector));
    if (quantized != nullptr) quantized->assign(vector.begin(), vector.end());
    FEDSCHED_RETURN_IF_ERROR(AddMasks(vector));
  } else {
    // Z_2^b: stochastic rounding with a fresh seed of this client's generator (the OS's entropy
    // on a device), masks mod 2^b, packed at b bits per element.
    const Bytes32 rounding_seed = rng_.Next32();
    std::vector<uint32_t> vector(update.size());
    FEDSCHED_RETURN_IF_ERROR(ClipAndQuantize(update, weight, setup_.params.clip_norm(),
                                             setup_.scale, absl::MakeSpan(vector), &rounding_seed));
    if (quantized != nullptr) {
      *quantized = vector;
      ReduceToBits(absl::MakeSpan(*quantized), setup_.bits);
    }
    FEDSCHED_RETURN_IF_ERROR(AddMasks(absl::MakeSpan(vector)));
    out.set_packed_masked(PackBits(vector, setup_.bits));
  }
  std::sort(unauthenticated_.begin(), unauthenticated_.end());
  out.mutable_unauthenticated_senders()->Add(unauthenticated_.begin(), unauthenticated_.end());
  step_ = Step::kUnmask;
  return out;
}

absl::StatusOr<SecAggUnmaskResponse> SecAggClient::Unmask(const SecAggUnmaskRequest& request) {
  FEDSCHED_RETURN_IF_ERROR(CheckStep(Step::kUnmask, "Unmask"));
  step_ = Step::kDone;
  const uint64_t round = setup_.params.round_id();
  FEDSCHED_RETURN_IF_ERROR(
      CheckAddressed(request.round_id(), request.recipient(), "unmask request"));
  if (request.survivors() < setup_.params.threshold()) {
    return absl::FailedPreconditionError(
        absl::StrCat("secagg client ", index_, ": only ", request.survivors(),
                     " clients survived, fewer than the threshold ", setup_.params.threshold(),
                     "; refusing to unmask"));
  }
  absl::flat_hash_set<uint32_t> survivors(request.self_seed_of().begin(),
                                          request.self_seed_of().end());
  SecAggUnmaskResponse out;
  out.set_round_id(round);
  out.set_sender(index_);
  // Revealing both shares of one client would let the server unmask its input.
  for (uint32_t owner : request.mask_key_of()) {
    if (survivors.contains(owner)) {
      return absl::InvalidArgumentError(absl::StrCat("secagg client ", index_,
                                                     ": asked for both the self-mask seed and the "
                                                     "mask key of client ",
                                                     owner, "; refusing"));
    }
  }
  auto reveal = [&](uint32_t owner, bool key) -> absl::Status {
    auto it = held_.find(owner);
    if (it == held_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("secagg client ", index_, ": holds no share of client ", owner));
    }
    auto* revealed = key ? out.add_mask_key_shares() : out.add_self_seed_shares();
    revealed->set_owner(owner);
    const auto& values = key ? it->second.mask_key_share() : it->second.self_seed_share();
    revealed->mutable_share()->Add(values.begin(), values.end());
    return absl::OkStatus();
  };
  for (uint32_t owner : request.self_seed_of()) FEDSCHED_RETURN_IF_ERROR(reveal(owner, false));
  for (uint32_t owner : request.mask_key_of()) FEDSCHED_RETURN_IF_ERROR(reveal(owner, true));
  return out;
}

}  // namespace fedsched::secagg

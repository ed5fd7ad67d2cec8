#include "secagg/server.h"

#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "secagg/packing.h"
#include "secagg/quantize.h"
#include "secagg/shamir.h"
#include "secagg/signing.h"

namespace fedsched::secagg {

using fedsched::v1::SecAggAdvertise;
using fedsched::v1::SecAggKeyDirectory;
using fedsched::v1::SecAggMaskedInput;
using fedsched::v1::SecAggMaskedPartialSum;
using fedsched::v1::SecAggRevealedShare;
using fedsched::v1::SecAggRoundParams;
using fedsched::v1::SecAggRoutedShares;
using fedsched::v1::SecAggShareKeys;
using fedsched::v1::SecAggUnmaskRequest;
using fedsched::v1::SecAggUnmaskResponse;

namespace {

absl::Status CheckSender(uint32_t sender, uint32_t n, absl::string_view what) {
  if (sender < n) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("secagg server: ", what, " from client ", sender,
                                                 ", outside the cohort of ", n));
}

// A whole step from a batch: `add` for each message, then `close`; the first error calls
// `fail` (the round fails) and is returned.
template <typename Message, typename Add, typename Close, typename Fail>
auto WholeStep(absl::Span<const Message> messages, Add add, Close close, Fail fail)
    -> decltype(close()) {
  for (const Message& message : messages) {
    if (absl::Status s = add(message); !s.ok()) {
      fail();
      return s;
    }
  }
  return close();
}

// A message above the bound its sender's neighbourhood allows (protocol.h) is refused before
// anything of it is kept.
absl::Status CheckSize(size_t bytes, size_t bound, absl::string_view what, uint32_t sender) {
  if (bytes <= bound) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("secagg server: the ", what, " of client ", sender,
                                                 " is ", bytes, " bytes, above the ", bound,
                                                 " its neighbourhood allows"));
}

absl::Status TooFew(absl::string_view who, size_t got, uint32_t t) {
  return absl::FailedPreconditionError(
      absl::StrCat("secagg server: ", got, " ", who, ", fewer than the threshold ", t,
                   "; the round fails and the model stays unchanged"));
}

}  // namespace

absl::StatusOr<SecAggServer> SecAggServer::Create(const SecAggRoundParams& params) {
  FEDSCHED_ASSIGN_OR_RETURN(RoundSetup setup, ResolveParams(params));
  return SecAggServer(std::move(setup));
}

absl::Status SecAggServer::CheckStep(Step expected, absl::string_view name) const {
  if (step_ == expected) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("secagg server: ", name, " out of order"));
}

std::vector<uint32_t> SecAggServer::HoldersIn(uint32_t owner,
                                              const absl::btree_set<uint32_t>& among) const {
  std::vector<uint32_t> out;
  if (among.contains(owner)) out.push_back(owner);
  for (uint32_t j : setup_.graph.Neighbours(owner)) {
    if (among.contains(j)) out.push_back(j);
  }
  return out;
}

absl::Status SecAggServer::AddAdvertisement(const SecAggAdvertise& ad,
                                            absl::string_view signing_public_key) {
  FEDSCHED_RETURN_IF_ERROR(CheckStep(Step::kAdvertise, "AddAdvertisement"));
  const auto& p = setup_.params;
  FEDSCHED_RETURN_IF_ERROR(CheckRound(p.round_id(), ad.round_id(), "an advertisement"));
  FEDSCHED_RETURN_IF_ERROR(CheckSender(ad.sender(), p.cohort_size(), "an advertisement"));
  FEDSCHED_RETURN_IF_ERROR(FromBytes(ad.cipher_public_key(), "cipher_public_key").status());
  FEDSCHED_RETURN_IF_ERROR(FromBytes(ad.mask_public_key(), "mask_public_key").status());
  FEDSCHED_RETURN_IF_ERROR(FromBytes(ad.self_seed_commitment(), "self_seed_commitment").status());
  FEDSCHED_RETURN_IF_ERROR(
      CheckSize(ad.ByteSizeLong(), kMaxAdvertiseBytes, "advertisement", ad.sender()));
  // The key must be the one bound to the sender's identity, or a member could sign with a key
  // of its own making and advertise in another's name to a neighbour that trusts the server.
  if (signing_public_key.empty() || ad.signing_public_key() != signing_public_key) {
    return absl::UnauthenticatedError(
        absl::StrCat("secagg server: the advertisement of client ", ad.sender(), " is signed with ",
                     ad.signing_public_key().empty() ? "no key" : "a key",
                     signing_public_key.empty() ? ", and its identity has no signing key bound"
                                                : " other than the one bound to its identity"));
  }
  FEDSCHED_RETURN_IF_ERROR(VerifyAdvertisement(p, ad));
  if (!advertised_.emplace(ad.sender(), ad).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg server: two advertisements from client ", ad.sender()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SecAggKeyDirectory>> SecAggServer::CloseAdvertisements() {
  FEDSCHED_RETURN_IF_ERROR(CheckStep(Step::kAdvertise, "CloseAdvertisements"));
  step_ = Step::kDone;  // an error fails the round
  const auto& p = setup_.params;
  if (advertised_.size() < p.threshold()) {
    return TooFew("clients advertised keys", advertised_.size(), p.threshold());
  }
  std::vector<SecAggKeyDirectory> out;
  for (const auto& [i, ad] : advertised_) {
    SecAggKeyDirectory& directory = out.emplace_back();
    directory.set_round_id(p.round_id());
    directory.set_recipient(i);
    for (uint32_t j : setup_.graph.Neighbours(i)) {
      auto it = advertised_.find(j);
      if (it != advertised_.end()) *directory.add_neighbours() = it->second;
    }
  }
  step_ = Step::kRoute;
  return out;
}

absl::StatusOr<std::vector<SecAggKeyDirectory>> SecAggServer::CollectAdvertisements(
    absl::Span<const SecAggAdvertise> advertisements) {
  return WholeStep(
      advertisements,
      [this](const SecAggAdvertise& m) { return AddAdvertisement(m, m.signing_public_key()); },
      [this] { return CloseAdvertisements(); }, [this] { step_ = Step::kDone; });
}

absl::Status SecAggServer::AddShareKeys(const SecAggShareKeys& message) {
  FEDSCHED_RETURN_IF_ERROR(CheckStep(Step::kRoute, "AddShareKeys"));
  const auto& p = setup_.params;
  const uint32_t i = message.sender();
  FEDSCHED_RETURN_IF_ERROR(CheckRound(p.round_id(), message.round_id(), "a share message"));
  if (!advertised_.contains(i) || share_messages_.contains(i)) {
    return absl::InvalidArgumentError(absl::StrCat("secagg server: share message from client ", i,
                                                   ", which did not advertise keys or already "
                                                   "shared them"));
  }
  FEDSCHED_RETURN_IF_ERROR(CheckUnverified(message));
  const absl::flat_hash_set<uint32_t> unverified(message.unverified_advertisers().begin(),
                                                 message.unverified_advertisers().end());
  // One sealed share to each advertised neighbour it verified, no more and no fewer: a share left
  // out would leave its receiver unable to mask with the sender while the sender may mask with
  // it.
  size_t neighbours = 0;
  for (uint32_t j : setup_.graph.Neighbours(i)) neighbours += advertised_.contains(j) ? 1 : 0;
  neighbours -= unverified.size();
  if (static_cast<size_t>(message.shares_size()) != neighbours) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg server: client ", i, " sent ", message.shares_size(),
                     " shares; it has ", neighbours,
                     " advertised neighbours it verified and must send exactly one sealed share "
                     "to each"));
  }
  FEDSCHED_RETURN_IF_ERROR(
      CheckSize(message.ByteSizeLong(), MaxShareKeysBytes(p.degree()), "share message", i));
  absl::flat_hash_set<uint32_t> receivers;
  for (const auto& share : message.shares()) {
    if (share.sender() != i || share.receiver() >= p.cohort_size() ||
        !setup_.graph.Adjacent(i, share.receiver()) || !advertised_.contains(share.receiver()) ||
        unverified.contains(share.receiver()) || !receivers.insert(share.receiver()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("secagg server: client ", i, " sent a share from ", share.sender(), " to ",
                       share.receiver(), ", not one of its advertised neighbours or repeated"));
    }
    if (share.ciphertext().size() > kMaxSealedShareBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("secagg server: client ", i, "'s sealed share to ", share.receiver(), " is ",
                       share.ciphertext().size(), " bytes, above ", kMaxSealedShareBytes));
    }
  }
  // Reported now, not with the masked input: the reporter holds no share of the advertiser and
  // will not mask with it, whether or not either of them reaches step 2.
  for (uint32_t j : unverified) {
    accusers_[j].insert(i);
    unverified_.insert(j);
  }
  share_messages_.emplace(i, message);
  return absl::OkStatus();
}

absl::Status SecAggServer::CheckUnverified(const SecAggShareKeys& message) const {
  const uint32_t i = message.sender();
  uint32_t last = 0;
  for (int k = 0; k < message.unverified_advertisers_size(); ++k) {
    const uint32_t j = message.unverified_advertisers(k);
    if (j >= setup_.params.cohort_size() || !setup_.graph.Adjacent(i, j) ||
        !advertised_.contains(j) || (k > 0 && j <= last)) {
      return absl::InvalidArgumentError(
          absl::StrCat("secagg server: client ", i, " reports that the advertisement of client ", j,
                       " did not verify, but ", j,
                       " is not a neighbour that advertised keys, or the list is not ascending"));
    }
    last = j;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SecAggRoutedShares>> SecAggServer::CloseShareKeys() {
  FEDSCHED_RETURN_IF_ERROR(CheckStep(Step::kRoute, "CloseShareKeys"));
  step_ = Step::kDone;
  const auto& p = setup_.params;
  for (const auto& [i, message] : share_messages_) shared_.insert(i);
  if (shared_.size() < p.threshold()) {
    return TooFew("clients shared keys", shared_.size(), p.threshold());
  }
  absl::btree_map<uint32_t, SecAggRoutedShares> routed;
  for (uint32_t i : shared_) {
    routed[i].set_round_id(p.round_id());
    routed[i].set_recipient(i);
  }
  for (const auto& [i, message] : share_messages_) {
    auto reported = accusers_.find(i);  // so far, only those whose signature did not verify
    for (const auto& share : message.shares()) {
      // Not to a receiver that could not verify i's advertisement: it holds no key for i.
      if (reported != accusers_.end() && reported->second.contains(share.receiver())) continue;
      auto it = routed.find(share.receiver());
      if (it != routed.end()) *it->second.add_shares() = share;  // receiver is in U2
    }
  }
  share_messages_.clear();
  std::vector<SecAggRoutedShares> out;
  for (auto& [i, r] : routed) out.push_back(std::move(r));
  masked_sum_.assign(p.vector_length(), 0);
  step_ = Step::kMasked;
  return out;
}

absl::StatusOr<std::vector<SecAggRoutedShares>> SecAggServer::RouteShares(
    absl::Span<const SecAggShareKeys> share_messages) {
  return WholeStep(
      share_messages, [this](const SecAggShareKeys& m) { return AddShareKeys(m); },
      [this] { return CloseShareKeys(); }, [this] { step_ = Step::kDone; });
}

absl::Status SecAggServer::CheckMasked(uint64_t round_id, absl::Span<const uint32_t> senders,
                                       size_t length, absl::string_view what) const {
  const auto& p = setup_.params;
  FEDSCHED_RETURN_IF_ERROR(CheckRound(p.round_id(), round_id, what));
  if (senders.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("secagg server: ", what, " names no sender"));
  }
  absl::flat_hash_set<uint32_t> seen;
  for (uint32_t i : senders) {
    if (!shared_.contains(i) || received_.contains(i) || !seen.insert(i).second) {
      return absl::InvalidArgumentError(absl::StrCat("secagg server: ", what, " from client ", i,
                                                     ", which did not share keys or already "
                                                     "sent one"));
    }
  }
  if (length != p.vector_length()) {
    return absl::InvalidArgumentError(absl::StrCat("secagg server: ", what, " has ", length,
                                                   " elements, expected ", p.vector_length()));
  }
  return absl::OkStatus();
}

void SecAggServer::Fold(absl::Span<const uint32_t> senders, const uint32_t* masked) {
  received_.insert(senders.begin(), senders.end());
  for (size_t e = 0; e < masked_sum_.size(); ++e) masked_sum_[e] += masked[e];
}

absl::Status SecAggServer::CheckAccusations(const SecAggMaskedInput& input) const {
  const uint32_t i = input.sender();
  uint32_t last = 0;
  for (int k = 0; k < input.unauthenticated_senders_size(); ++k) {
    const uint32_t v = input.unauthenticated_senders(k);
    // Only a neighbour that shared keys sent this client a share it could fail to open.
    if (v >= setup_.params.cohort_size() || !setup_.graph.Adjacent(i, v) || !shared_.contains(v) ||
        (k > 0 && v <= last)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "secagg server: client ", i, " reports that the share of client ", v,
          " did not authenticate, but ", v,
          " sent it no share (not a neighbour that shared keys), or the list is not ascending"));
    }
    last = v;
  }
  return absl::OkStatus();
}

bool SecAggServer::MaskedWith(uint32_t r, uint32_t v) const {
  if (!setup_.graph.Adjacent(r, v) || !shared_.contains(v)) return false;
  auto it = accusers_.find(v);
  return it == accusers_.end() || !it->second.contains(r);
}

absl::Status SecAggServer::AddMaskedInput(const SecAggMaskedInput& input) {
  FEDSCHED_RETURN_IF_ERROR(CheckStep(Step::kMasked, "AddMaskedInput"));
  const uint32_t sender = input.sender();
  const uint32_t bits = setup_.bits;
  // A bad message is refused without failing the round. Below 32 bits the elements are packed
  // (and `masked` must be empty); the length check counts them by the packed size.
  const uint64_t length = setup_.params.vector_length();
  if (bits != kFullBits &&
      (input.masked_size() != 0 || input.packed_masked().size() != PackedBytes(length, bits))) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg server: the masked input of client ", sender, " must carry ", length,
                     " elements packed at ", bits, " bits (", PackedBytes(length, bits),
                     " bytes of packed_masked), got ", input.packed_masked().size(), " bytes and ",
                     input.masked_size(), " fixed32 elements"));
  }
  if (bits == kFullBits && !input.packed_masked().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("secagg server: the masked input of client ",
                                                   sender,
                                                   " is packed, but the round runs at 32 bits"));
  }
  FEDSCHED_RETURN_IF_ERROR(CheckMasked(
      input.round_id(), {&sender, 1},
      bits == kFullBits ? static_cast<size_t>(input.masked_size()) : length, "masked input"));
  FEDSCHED_RETURN_IF_ERROR(CheckSize(input.ByteSizeLong(),
                                     MaxMaskedInputBytes(length, setup_.params.degree(), bits),
                                     "masked input", sender));
  FEDSCHED_RETURN_IF_ERROR(CheckAccusations(input));
  std::vector<uint32_t> held;
  if (bits == kFullBits) {
    held.assign(input.masked().begin(), input.masked().end());
  } else {
    held.resize(length);
    FEDSCHED_RETURN_IF_ERROR(UnpackBits(input.packed_masked(), bits, absl::MakeSpan(held)));
  }
  // Held, not folded, until step 2 closes: an input whose sender a neighbour could not
  // authenticate must be left out of the sum, and that report may come after the input.
  received_.insert(sender);
  inputs_[sender] = std::move(held);
  for (uint32_t v : input.unauthenticated_senders()) accusers_[v].insert(sender);
  return absl::OkStatus();
}

absl::Status SecAggServer::AddMaskedPartialSum(const SecAggMaskedPartialSum& partial) {
  FEDSCHED_RETURN_IF_ERROR(CheckStep(Step::kMasked, "AddMaskedPartialSum"));
  const absl::Span<const uint32_t> senders(partial.senders().data(), partial.senders_size());
  FEDSCHED_RETURN_IF_ERROR(
      CheckMasked(partial.round_id(), senders, partial.masked_sum_size(), "masked partial sum"));
  Fold(senders, partial.masked_sum().data());
  folded_.insert(senders.begin(), senders.end());
  return absl::OkStatus();
}

absl::Status SecAggServer::SettleSurvivors() {
  // A member whose share a neighbour could not authenticate is left out for everyone (the
  // server decides, so all survivors unmask the same set): the accuser did not mask with it.
  for (const auto& [v, accusers] : accusers_) {
    if (!received_.contains(v)) continue;
    if (folded_.contains(v)) {
      return absl::FailedPreconditionError(
          absl::StrCat("secagg server: client ", v,
                       "'s share did not authenticate, but its input is inside "
                       "an aggregator's partial sum and cannot be left out; the round fails"));
    }
    excluded_.insert(v);
  }
  for (uint32_t v : received_) {
    if (!excluded_.contains(v)) survivors_.insert(v);
  }
  for (auto& [v, input] : inputs_) {
    if (excluded_.contains(v)) continue;  // discarded unread: its self mask is never removed
    for (size_t e = 0; e < masked_sum_.size(); ++e) masked_sum_[e] += input[e];
  }
  inputs_.clear();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SecAggUnmaskRequest>> SecAggServer::RequestUnmasking() {
  FEDSCHED_RETURN_IF_ERROR(CheckStep(Step::kMasked, "RequestUnmasking"));
  step_ = Step::kDone;
  const auto& p = setup_.params;
  FEDSCHED_RETURN_IF_ERROR(SettleSurvivors());
  if (survivors_.size() < p.threshold()) {
    return TooFew(excluded_.empty()
                      ? std::string("clients sent masked inputs")
                      : absl::StrCat("clients sent masked inputs and were not left out for "
                                     "unauthenticated shares (",
                                     excluded_.size(), " were)"),
                  survivors_.size(), p.threshold());
  }
  // Dropped after sharing (or left out): their mask keys are needed only where a survivor
  // masked with them, and only those survivors hold a share of them that opened.
  for (uint32_t v : shared_) {
    if (survivors_.contains(v)) continue;
    for (uint32_t j : setup_.graph.Neighbours(v)) {
      if (survivors_.contains(j) && MaskedWith(j, v)) {
        dropped_.insert(v);
        break;
      }
    }
  }
  for (uint32_t v : survivors_) {
    const size_t holders = HoldersIn(v, survivors_).size();
    if (holders < p.threshold()) {
      return TooFew(absl::StrCat("surviving holders of client ", v, "'s shares"), holders,
                    p.threshold());
    }
  }
  for (uint32_t v : dropped_) {
    size_t holders = 0;
    for (uint32_t j : setup_.graph.Neighbours(v)) {
      holders += survivors_.contains(j) && MaskedWith(j, v) ? 1 : 0;
    }
    if (holders < p.threshold()) {
      return TooFew(absl::StrCat("surviving holders of client ", v, "'s mask key"), holders,
                    p.threshold());
    }
  }
  std::vector<SecAggUnmaskRequest> out;
  for (uint32_t r : survivors_) {
    SecAggUnmaskRequest& request = out.emplace_back();
    request.set_round_id(p.round_id());
    request.set_recipient(r);
    request.set_survivors(static_cast<uint32_t>(survivors_.size()));
    request.add_self_seed_of(r);
    for (uint32_t v : setup_.graph.Neighbours(r)) {
      if (survivors_.contains(v)) request.add_self_seed_of(v);
      if (dropped_.contains(v) && MaskedWith(r, v)) request.add_mask_key_of(v);
    }
  }
  step_ = Step::kUnmask;
  return out;
}

bool SecAggServer::Verifies(uint32_t owner, bool mask_key, const Bytes32& secret) const {
  const SecAggAdvertise& ad = advertised_.at(owner);
  if (mask_key) {
    absl::StatusOr<X25519Key> key = X25519Key::FromPrivate(secret);
    return key.ok() && ToString(key->public_key()) == ad.mask_public_key();
  }
  return ToString(SelfSeedCommitment(setup_.params.round_id(), owner, secret)) ==
         ad.self_seed_commitment();
}

absl::StatusOr<absl::btree_map<uint32_t, Bytes32>> SecAggServer::Rebuild(bool mask_keys) {
  const auto& p = setup_.params;
  const absl::btree_set<uint32_t>& owners = mask_keys ? dropped_ : survivors_;
  // AddUnmaskResponse let through only shares asked for, of the right length.
  absl::btree_map<uint32_t, std::vector<Share>> shares;
  for (const auto& [r, response] : responses_) {
    for (const SecAggRevealedShare& share :
         mask_keys ? response.mask_key_shares() : response.self_seed_shares()) {
      shares[share.owner()].push_back(
          Share{ShamirPoint(r), {share.share().begin(), share.share().end()}});
    }
  }
  absl::btree_map<uint32_t, Bytes32> secrets;
  for (uint32_t v : owners) {
    const std::vector<Share>& got = shares[v];
    if (got.size() < p.threshold()) {
      return TooFew(
          absl::StrCat("shares of client ", v, "'s ", mask_keys ? "mask key" : "self-mask seed"),
          got.size(), p.threshold());
    }
    // A share that does not fit is set aside when more than t shares arrived: first all of
    // them in order, then leaving out one at a time (one tampered share is survived).
    std::optional<Bytes32> secret;
    for (int skip = -1; skip < static_cast<int>(got.size()) && !secret.has_value(); ++skip) {
      if (skip >= 0 && got.size() <= p.threshold()) break;
      std::vector<Share> use;
      for (int k = 0; k < static_cast<int>(got.size()); ++k) {
        if (k != skip) use.push_back(got[k]);
      }
      absl::StatusOr<Bytes32> candidate = ShamirCombine(use, static_cast<int>(p.threshold()));
      if (candidate.ok() && Verifies(v, mask_keys, *candidate)) {
        secret = *candidate;
        if (skip >= 0) rejected_.insert(static_cast<uint32_t>(got[skip].x - 1));
      }
    }
    if (!secret.has_value()) {
      return absl::DataLossError(absl::StrCat(
          "secagg server: the shares of client ", v, "'s ",
          mask_keys ? "mask key" : "self-mask seed", " do not rebuild the advertised ",
          mask_keys ? "public key" : "commitment", " (a tampered share); the round fails"));
    }
    secrets[v] = *secret;
  }
  return secrets;
}

absl::Status SecAggServer::RemoveMasks(const absl::btree_map<uint32_t, Bytes32>& seeds,
                                       const absl::btree_map<uint32_t, Bytes32>& keys) {
  absl::Span<uint32_t> sum(masked_sum_);
  for (const auto& [v, seed] : seeds) FEDSCHED_RETURN_IF_ERROR(AddPrgMask(seed, -1, sum));
  const uint64_t round = setup_.params.round_id();
  for (const auto& [v, private_key] : keys) {
    FEDSCHED_ASSIGN_OR_RETURN(X25519Key key, X25519Key::FromPrivate(private_key));
    for (uint32_t r : setup_.graph.Neighbours(v)) {
      if (!survivors_.contains(r) || !MaskedWith(r, v)) continue;
      // Survivor r added PairSign(r, v) * PRG(s_rv); take it out again.
      FEDSCHED_ASSIGN_OR_RETURN(Bytes32 peer, FromBytes(advertised_[r].mask_public_key(), "key"));
      FEDSCHED_ASSIGN_OR_RETURN(Bytes32 seed, PairwiseSeed(key, peer, round, v, r));
      FEDSCHED_RETURN_IF_ERROR(AddPrgMask(seed, -PairSign(r, v), sum));
    }
  }
  return absl::OkStatus();
}

absl::Status SecAggServer::AddUnmaskResponse(const SecAggUnmaskResponse& response) {
  FEDSCHED_RETURN_IF_ERROR(CheckStep(Step::kUnmask, "AddUnmaskResponse"));
  const auto& p = setup_.params;
  const uint32_t r = response.sender();
  FEDSCHED_RETURN_IF_ERROR(CheckRound(p.round_id(), response.round_id(), "an unmask response"));
  FEDSCHED_RETURN_IF_ERROR(
      CheckSize(response.ByteSizeLong(), MaxUnmaskResponseBytes(p.degree()), "unmask response", r));
  if (!survivors_.contains(r) || responses_.contains(r)) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg server: unmask response from client ", r,
                     ", which sent no masked input or already responded"));
  }
  for (const bool mask_keys : {false, true}) {
    const absl::btree_set<uint32_t>& owners = mask_keys ? dropped_ : survivors_;
    for (const SecAggRevealedShare& share :
         mask_keys ? response.mask_key_shares() : response.self_seed_shares()) {
      const uint32_t v = share.owner();
      // Exactly what RequestUnmasking asked of r: a share of this kind of this owner.
      const bool asked =
          owners.contains(v) &&
          (v == r ? !mask_keys : setup_.graph.Adjacent(r, v) && (!mask_keys || MaskedWith(r, v)));
      if (!asked || share.share_size() != kChunksPerSecret) {
        return absl::InvalidArgumentError(absl::StrCat(
            "secagg server: client ", r, " revealed a ", mask_keys ? "mask-key" : "self-seed",
            " share of client ", v, " that was not asked for or is malformed"));
      }
    }
  }
  responses_.emplace(r, response);
  return absl::OkStatus();
}

absl::StatusOr<UnmaskedSum> SecAggServer::CloseUnmasking() {
  FEDSCHED_RETURN_IF_ERROR(CheckStep(Step::kUnmask, "CloseUnmasking"));
  step_ = Step::kDone;
  const auto& p = setup_.params;
  if (responses_.size() < p.threshold()) {
    return TooFew("clients answered the unmask request", responses_.size(), p.threshold());
  }
  FEDSCHED_ASSIGN_OR_RETURN(auto seeds, Rebuild(/*mask_keys=*/false));
  FEDSCHED_ASSIGN_OR_RETURN(auto keys, Rebuild(/*mask_keys=*/true));
  FEDSCHED_RETURN_IF_ERROR(RemoveMasks(seeds, keys));
  UnmaskedSum out;
  // The sums ran mod 2^32; the inputs were mod 2^b, and 2^b divides 2^32.
  ReduceToBits(absl::MakeSpan(masked_sum_), setup_.bits);
  out.sum = Dequantize(masked_sum_, setup_.scale, setup_.bits);
  out.contributors.assign(survivors_.begin(), survivors_.end());
  for (uint32_t v : shared_) {
    if (!survivors_.contains(v)) out.dropped_after_sharing.push_back(v);
  }
  out.error_bound = ErrorBound(p.cohort_size(), p.clip_norm(), setup_.bits);
  out.bits = setup_.bits;
  out.rejected_share_senders.assign(rejected_.begin(), rejected_.end());
  out.left_out.assign(excluded_.begin(), excluded_.end());
  out.ring_sum = std::move(masked_sum_);
  masked_sum_.clear();
  responses_.clear();
  return out;
}

absl::StatusOr<UnmaskedSum> SecAggServer::Unmask(absl::Span<const SecAggUnmaskResponse> responses) {
  return WholeStep(
      responses, [this](const SecAggUnmaskResponse& m) { return AddUnmaskResponse(m); },
      [this] { return CloseUnmasking(); }, [this] { step_ = Step::kDone; });
}

}  // namespace fedsched::secagg

#include "secagg/protocol.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "secagg/quantize.h"

namespace fedsched::secagg {
namespace {

constexpr absl::string_view kDomain = "fedsched-secagg-v1";
constexpr uint64_t kMaxVectorLength = uint64_t{1} << 28;

void AppendU64(std::string& out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>(v >> (8 * i)));
}

std::string PairSalt(absl::string_view purpose, uint64_t round_id, uint32_t a, uint32_t b) {
  std::string salt = absl::StrCat(kDomain, " ", purpose);
  AppendU64(salt, round_id);
  AppendU64(salt, std::min(a, b));
  AppendU64(salt, std::max(a, b));
  return salt;
}

absl::StatusOr<Bytes32> DerivePairKey(absl::string_view purpose, const X25519Key& own,
                                      const Bytes32& peer_public, uint64_t round_id, uint32_t a,
                                      uint32_t b) {
  absl::StatusOr<Bytes32> shared = own.Agree(peer_public);
  if (!shared.ok()) return shared.status();
  absl::StatusOr<std::string> key =
      HkdfSha256(ToString(*shared), PairSalt(purpose, round_id, a, b), purpose, 32);
  if (!key.ok()) return key.status();
  return FromBytes(*key, purpose);
}

}  // namespace

absl::StatusOr<RoundSetup> ResolveParams(const fedsched::v1::SecAggRoundParams& params) {
  const uint32_t n = params.cohort_size();
  const uint32_t k = params.degree();
  const uint32_t t = params.threshold();
  if (params.graph_seed().size() != 32) {
    return absl::InvalidArgumentError(absl::StrCat("secagg params: graph_seed has ",
                                                   params.graph_seed().size(), " bytes, not 32"));
  }
  absl::StatusOr<Bytes32> seed = FromBytes(params.graph_seed(), "graph_seed");
  absl::StatusOr<CommunicationGraph> graph = CommunicationGraph::Create(n, k, *seed);
  if (!graph.ok()) return graph.status();
  if (t < ChooseThreshold(k) || t > k + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg params: threshold ", t, " must be a strict majority of the ", k + 1,
                     " share holders, in [", ChooseThreshold(k), ", ", k + 1, "]"));
  }
  if (params.vector_length() == 0 || params.vector_length() > kMaxVectorLength) {
    return absl::InvalidArgumentError(absl::StrCat("secagg params: vector_length ",
                                                   params.vector_length(), " is not in [1, 2^28]"));
  }
  const uint32_t bits = params.bits_per_element() == 0 ? kFullBits : params.bits_per_element();
  if (bits < kMinBits || bits > kFullBits) {
    return absl::InvalidArgumentError(absl::StrCat("secagg params: bits_per_element ", bits,
                                                   " is not in [", kMinBits, ", ", kFullBits,
                                                   "] (0 = 32)"));
  }
  absl::StatusOr<double> scale = ChooseScale(n, params.clip_norm(), bits);
  if (!scale.ok()) return scale.status();
  return RoundSetup{params, *std::move(graph), *scale, bits};
}

absl::StatusOr<Bytes32> ShareKey(const X25519Key& own, const Bytes32& peer_public,
                                 uint64_t round_id, uint32_t a, uint32_t b) {
  return DerivePairKey("share key", own, peer_public, round_id, a, b);
}

absl::StatusOr<Bytes32> PairwiseSeed(const X25519Key& own, const Bytes32& peer_public,
                                     uint64_t round_id, uint32_t a, uint32_t b) {
  return DerivePairKey("pairwise mask", own, peer_public, round_id, a, b);
}

std::string ShareAad(uint64_t round_id, uint32_t sender, uint32_t receiver) {
  std::string aad = absl::StrCat(kDomain, " share");
  AppendU64(aad, round_id);
  AppendU64(aad, sender);
  AppendU64(aad, receiver);
  return aad;
}

std::vector<uint8_t> ShareNonce(uint32_t sender) {
  std::vector<uint8_t> nonce(12, 0);
  for (int i = 0; i < 4; ++i) nonce[8 + i] = static_cast<uint8_t>(sender >> (24 - 8 * i));
  return nonce;
}

Bytes32 SelfSeedCommitment(uint64_t round_id, uint32_t client, const Bytes32& seed) {
  std::string data = absl::StrCat(kDomain, " self seed");
  AppendU64(data, round_id);
  AppendU64(data, client);
  data += ToString(seed);
  return Sha256Of(data);
}

std::string AdvertisementSigningBytes(const fedsched::v1::SecAggRoundParams& params,
                                      const fedsched::v1::SecAggAdvertise& advertisement) {
  std::string data = absl::StrCat(kDomain, " advertise");
  AppendU64(data, params.round_id());
  data += params.graph_seed();
  AppendU64(data, advertisement.sender());
  // Length-prefixed: the fixed-size fields that follow cannot be shifted into the id.
  AppendU64(data, advertisement.signer_id().size());
  data += advertisement.signer_id();
  for (const std::string* key :
       {&advertisement.cipher_public_key(), &advertisement.mask_public_key(),
        &advertisement.self_seed_commitment(), &advertisement.signing_public_key()}) {
    AppendU64(data, key->size());
    data += *key;
  }
  return data;
}

absl::Status SignAdvertisement(const fedsched::v1::SecAggRoundParams& params, const SigningKey& key,
                               absl::string_view signer_id,
                               fedsched::v1::SecAggAdvertise& advertisement) {
  advertisement.set_signer_id(std::string(signer_id));
  advertisement.set_signing_public_key(key.public_key());
  absl::StatusOr<std::string> signature =
      key.Sign(AdvertisementSigningBytes(params, advertisement));
  if (!signature.ok()) return signature.status();
  advertisement.set_signature(*std::move(signature));
  return absl::OkStatus();
}

absl::Status VerifyAdvertisement(const fedsched::v1::SecAggRoundParams& params,
                                 const fedsched::v1::SecAggAdvertise& advertisement) {
  return VerifySignature(advertisement.signing_public_key(),
                         AdvertisementSigningBytes(params, advertisement),
                         advertisement.signature(),
                         absl::StrCat("the advertisement of client ", advertisement.sender(), " ('",
                                      advertisement.signer_id(), "')"));
}

absl::Status CheckRound(uint64_t expected, uint64_t got, absl::string_view what) {
  if (expected == got) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("secagg: ", what, " is for round ", got,
                                                 ", this is round ", expected,
                                                 " (replayed or stale message)"));
}

}  // namespace fedsched::secagg

// What the client and server sides of secure aggregation share: the resolved round parameters
// (graph, threshold, fixed-point scale) and the key derivations and associated data that bind
// every secret to its round and its pair of clients. Bonawitz et al., CCS 2017, section 4
// (figure 4); SecAgg+ (Bell et al., CCS 2020, section 3) for the graph.
#ifndef FEDSCHED_SECAGG_PROTOCOL_H_
#define FEDSCHED_SECAGG_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fedsched/v1/secagg.pb.h"
#include "secagg/crypto.h"
#include "secagg/graph.h"
#include "secagg/signing.h"

namespace fedsched::secagg {

// A round's parameters, checked, with the graph built and the scale chosen.
struct RoundSetup {
  fedsched::v1::SecAggRoundParams params;
  CommunicationGraph graph;
  double scale = 0;  // fixed-point units per unit of the update (ChooseScale)
  uint32_t bits = 32;  // b: the ring is Z_2^b (params.bits_per_element, 0 read as 32)
};

// Checks `params` and builds the graph. Errors (invalid argument, naming the field): cohort
// below 3, degree not n-1 nor even in [2, n-2], threshold outside [floor((k+1)/2)+1, k+1] (a
// strict majority of each client's k+1 share holders, at least 2), graph_seed not 32 bytes,
// vector_length 0 or above 2^28, clip_norm not finite and > 0, bits_per_element not 0 nor in
// [8, 32], or a cohort too large for its bits (ChooseScale).
[[nodiscard]] absl::StatusOr<RoundSetup> ResolveParams(
    const fedsched::v1::SecAggRoundParams& params);

// The Shamir evaluation point of cohort member `client`: client + 1.
inline uint64_t ShamirPoint(uint32_t client) { return uint64_t{client} + 1; }

// The sign with which `self` adds the pairwise mask it shares with `other`: +1 if self <
// other, -1 otherwise, so that the pair's masks cancel in the sum.
inline int PairSign(uint32_t self, uint32_t other) { return self < other ? 1 : -1; }

// The AES-256-GCM key of the pair (a, b) for sealing shares: HKDF-SHA256 of their X25519
// agreement, salted with the round id and the unordered pair. Errors: those of X25519Key::Agree.
[[nodiscard]] absl::StatusOr<Bytes32> ShareKey(const X25519Key& own, const Bytes32& peer_public,
                                               uint64_t round_id, uint32_t a, uint32_t b);

// The PRG seed of the pairwise mask of (a, b): HKDF-SHA256 of their mask-key agreement with
// the round id and the unordered pair. Both members (and the server, after rebuilding a
// dropped member's private key) derive the same seed.
[[nodiscard]] absl::StatusOr<Bytes32> PairwiseSeed(const X25519Key& own, const Bytes32& peer_public,
                                                   uint64_t round_id, uint32_t a, uint32_t b);

// The associated data of the share sent by `sender` to `receiver` in `round_id`.
std::string ShareAad(uint64_t round_id, uint32_t sender, uint32_t receiver);

// The 12-byte GCM nonce of a share: the sender's index (each pair key seals one share per
// direction, and keys are fresh every round, so a nonce never repeats under a key).
std::vector<uint8_t> ShareNonce(uint32_t sender);

// SHA-256 commitment to a self-mask seed, bound to the round and the client.
Bytes32 SelfSeedCommitment(uint64_t round_id, uint32_t client, const Bytes32& seed);

// The bytes a member signs in its advertisement (Bonawitz et al., CCS 2017, section 6): a
// domain tag, the round id and graph seed of `params` (together they name one attempt of one
// round), the sender's index, its signer_id (length-prefixed), both X25519 public keys, the
// self-seed commitment and the signing public key. A signature over them cannot be moved to
// another round, attempt, index, client id or key.
std::string AdvertisementSigningBytes(const fedsched::v1::SecAggRoundParams& params,
                                      const fedsched::v1::SecAggAdvertise& advertisement);

// Sets signer_id, signing_public_key and signature of `advertisement` (its keys and commitment
// set). Errors: those of SigningKey::Sign.
[[nodiscard]] absl::Status SignAdvertisement(const fedsched::v1::SecAggRoundParams& params,
                                             const SigningKey& key, absl::string_view signer_id,
                                             fedsched::v1::SecAggAdvertise& advertisement);

// Checks the signature of `advertisement` against its own signing_public_key. The server checks
// beforehand that this key is the one bound to the sender's identity; a neighbour trusts the
// key the server forwards. Errors: INVALID_ARGUMENT for a key or signature of the wrong size,
// UNAUTHENTICATED when the signature does not verify (both naming the sender).
[[nodiscard]] absl::Status VerifyAdvertisement(const fedsched::v1::SecAggRoundParams& params,
                                               const fedsched::v1::SecAggAdvertise& advertisement);

// Size bounds of the step messages, fixed by the neighbourhood (degree k), so that a member
// cannot make the server hold or route more than its part of the graph. A sealed share is the
// 12-byte nonce, a SecAggSharePlaintext (about 120 bytes) and the 16-byte tag.
inline constexpr size_t kMaxSealedShareBytes = 256;
// An advertisement: three 32-byte keys, the commitment, a 64-byte signature and a client id.
inline constexpr size_t kMaxAdvertiseBytes = 512;
// SecAggShareKeys: one sealed share per neighbour, each with its framing.
inline size_t MaxShareKeysBytes(uint32_t degree) {
  return 64 + size_t{degree} * (kMaxSealedShareBytes + 32);
}
// SecAggUnmaskResponse: at most k + 1 revealed self-seed shares and k mask-key shares.
inline size_t MaxUnmaskResponseBytes(uint32_t degree) { return 64 + (2 * size_t{degree} + 1) * 96; }
// SecAggMaskedInput: 4 bytes per element (b/8 packed below 32 bits), plus at most k accused
// neighbours.
inline size_t MaxMaskedInputBytes(uint64_t vector_length, uint32_t degree, uint32_t bits = 32) {
  return 64 + (vector_length * bits + 7) / 8 + 8 * size_t{degree};
}

// Errors for messages of the wrong round or addressee, naming both.
[[nodiscard]] absl::Status CheckRound(uint64_t expected, uint64_t got, absl::string_view what);

}  // namespace fedsched::secagg

#endif  // FEDSCHED_SECAGG_PROTOCOL_H_

// The client side of secure aggregation as a pure state machine (Bonawitz et al., CCS 2017,
// section 4, figure 4, rounds 0-4 of the honest-but-curious variant; SecAgg+ of Bell et al.,
// CCS 2020, section 3, restricts every exchange to the client's graph neighbours).
//
// One object per client per round. The four steps must be called in order, each once; each
// takes what the server sent and returns what the client sends next, or an error after which
// the client stops taking part (it counts as dropped). The SDK runs these steps around the
// app's trainer: the trainer hands the SDK a plain update, the SDK hands this class the update
// and its FedAvg weight, and only the masked vector leaves the device.
#ifndef FEDSCHED_SECAGG_CLIENT_H_
#define FEDSCHED_SECAGG_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fedsched/v1/secagg.pb.h"
#include "secagg/crypto.h"
#include "secagg/protocol.h"
#include "secagg/signing.h"

namespace fedsched::secagg {

// Who a member is beyond its cohort index, for signing its advertisement (Bonawitz et al., CCS
// 2017, section 6): the device's client id and its long-term signing key, whose public key the
// server bound to the device's identity.
struct MemberIdentity {
  std::string client_id;
  SigningKey signing_key;
};

class SecAggClient {
 public:
  // Client `index` (< cohort_size) of the round `params`, signing as `identity`; every key, seed
  // and polynomial coefficient comes from a generator seeded with `entropy` (SystemEntropy() in
  // production). Errors: those of ResolveParams; invalid argument for an index outside the
  // cohort.
  [[nodiscard]] static absl::StatusOr<SecAggClient> Create(
      const fedsched::v1::SecAggRoundParams& params, uint32_t index, const Bytes32& entropy,
      MemberIdentity identity);

  // Step 0 (AdvertiseKeys): fresh X25519 key pairs for share encryption and pairwise masks,
  // and the commitment to a fresh self-mask seed, signed with the identity's key
  // (SignAdvertisement).
  [[nodiscard]] absl::StatusOr<fedsched::v1::SecAggAdvertise> Advertise();

  // Step 1 (ShareKeys): checks the neighbours' advertisements and verifies each one's signature
  // (VerifyAdvertisement) before deriving any key from it: a neighbour whose signature fails is
  // treated as dropped (no share sealed to its keys, no mask with it, none of its shares
  // accepted) and listed in the output's unverified_advertisers. Then Shamir-shares the mask
  // private key and the self-mask seed among its share holders (itself and the verified
  // neighbours), threshold t, sealing each neighbour's shares with AES-256-GCM. Errors: wrong
  // round or recipient, an advertisement from a non-neighbour, a repeated or malformed one, or
  // fewer than t holders (failed precondition).
  [[nodiscard]] absl::StatusOr<fedsched::v1::SecAggShareKeys> ShareKeys(
      const fedsched::v1::SecAggKeyDirectory& directory);

  // Step 2 (MaskedInputCollection): opens the shares routed to it; a neighbour whose share does
  // not authenticate (forged, tampered, replayed or misrouted) is treated as dropped: no mask
  // with it, no share of it held, and it is listed in the output's unauthenticated_senders for
  // the server to leave out. Then clips
  // weight * update to clip_norm, quantises it into Z_2^b (b = bits_per_element: round to
  // nearest at 32, else stochastic rounding with a seed drawn from the client's generator) and
  // adds the self mask and one pairwise mask per neighbour whose share opened, mod 2^b; below 32
  // bits the result is packed into packed_masked (secagg/packing.h). `update` has vector_length
  // elements; `weight` is in [0, 1]. `quantized`, when not null, receives the quantised input
  // before masking, mod 2^b (tests check the unmasked sum against it). Errors: a share from a
  // non-neighbour or a second one from a neighbour (invalid argument), fewer than t holders
  // left (failed precondition), and those of ClipAndQuantize.
  [[nodiscard]] absl::StatusOr<fedsched::v1::SecAggMaskedInput> MaskInput(
      const fedsched::v1::SecAggRoutedShares& routed, absl::Span<const float> update, double weight,
      std::vector<uint32_t>* quantized = nullptr);

  // Step 3 (Unmasking): reveals its shares of the self-mask seeds of the survivors listed and
  // of the mask private keys of the dropped clients listed. Refuses (failed precondition) when
  // fewer than t survived, and (invalid argument) when a client is in both lists or it holds
  // no share of a listed client; answers one request per round.
  [[nodiscard]] absl::StatusOr<fedsched::v1::SecAggUnmaskResponse> Unmask(
      const fedsched::v1::SecAggUnmaskRequest& request);

  uint32_t index() const { return index_; }
  // b of the round's ring Z_2^b (SecAggRoundParams.bits_per_element, 0 read as 32).
  uint32_t bits_per_element() const { return setup_.bits; }

 private:
  enum class Step { kAdvertise, kShareKeys, kMaskInput, kUnmask, kDone };
  SecAggClient(RoundSetup setup, uint32_t index, const Bytes32& entropy, MemberIdentity identity)
      : setup_(std::move(setup)), index_(index), identity_(std::move(identity)), rng_(entropy) {}

  [[nodiscard]] absl::Status CheckStep(Step expected, absl::string_view name) const;
  // A server message must be for this round and this client.
  [[nodiscard]] absl::Status CheckAddressed(uint64_t round_id, uint32_t recipient,
                                            absl::string_view what) const;
  // Checks one neighbour's advertisement of the key directory (neighbour, round, key sizes, not
  // listed twice); a failed signature is no error: the neighbour joins unverified_.
  [[nodiscard]] absl::Status TakeAdvertisement(const fedsched::v1::SecAggAdvertise& peer);
  [[nodiscard]] absl::Status OpenShares(const fedsched::v1::SecAggRoutedShares& routed);
  [[nodiscard]] absl::Status AddMasks(absl::Span<uint32_t> vector) const;

  RoundSetup setup_;
  uint32_t index_;
  MemberIdentity identity_;
  Drbg rng_;
  Step step_ = Step::kAdvertise;
  X25519Key cipher_keys_;
  X25519Key mask_keys_;
  Bytes32 self_seed_{};
  // Neighbours that advertised (U1 within the neighbourhood), by index.
  absl::btree_map<uint32_t, fedsched::v1::SecAggAdvertise> peers_;
  // Shares this client holds, by owner (its own included): [mask key share, self seed share].
  absl::btree_map<uint32_t, fedsched::v1::SecAggSharePlaintext> held_;
  // AES-256-GCM keys shared with each advertised neighbour (one agreement serves both
  // directions: ShareKey salts with the unordered pair).
  absl::btree_map<uint32_t, Bytes32> share_keys_;
  // Neighbours whose shares arrived (U2 within the neighbourhood): the pairwise masks.
  std::vector<uint32_t> maskers_;
  // Neighbours whose routed share did not authenticate (reported with the masked input).
  std::vector<uint32_t> unauthenticated_;
  // Neighbours whose advertisement's signature did not verify (reported with the shares).
  std::vector<uint32_t> unverified_;
};

}  // namespace fedsched::secagg

#endif  // FEDSCHED_SECAGG_CLIENT_H_

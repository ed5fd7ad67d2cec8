// The server side of secure aggregation as a pure state machine (Bonawitz et al., CCS 2017,
// section 4, figure 4, the server's part of rounds 0-4; SecAgg+ of Bell et al., CCS 2020,
// section 3, for the neighbourhoods).
//
// The server only ever sees masked vectors: its API takes protocol messages and nothing else
// (there is no entry point for a plain update), each SecAggMaskedInput is held masked until
// step 2 closes and then added into one sum or, when a neighbour could not authenticate its
// sender's share, discarded unread (docs/guides/SECURE_AGGREGATION.md "A malicious member"), and
// for every client it asks for the shares of at most one of its two secrets (the self-mask seed of
// a survivor or the mask key of a dropped client), so no individual input can be unmasked. It
// learns the sum over the survivors, who dropped when, and nothing else about any single input
// (docs/guides/SECURE_AGGREGATION.md "Threat model").
//
// Each step takes its messages one at a time as they arrive (Add*: a bad message is refused
// with an error for that client alone, who then counts as dropped; the round goes on) and is
// closed when the caller moves on (Close*, RequestUnmasking: an error there fails the round, and
// the caller keeps its model unchanged). Order: AddAdvertisement... CloseAdvertisements,
// AddShareKeys... CloseShareKeys, AddMaskedInput... RequestUnmasking, AddUnmaskResponse...
// CloseUnmasking. CollectAdvertisements, RouteShares and Unmask do a whole step from a batch
// (strict: the first bad message fails the round), for tests and in-process runs.
#ifndef FEDSCHED_SECAGG_SERVER_H_
#define FEDSCHED_SECAGG_SERVER_H_

#include <cstdint>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fedsched/v1/secagg.pb.h"
#include "secagg/protocol.h"

namespace fedsched::secagg {

// The result of a round: the sum over the survivors, decoded to floats.
struct UnmaskedSum {
  // sum_k weight_k * clip(update_k), vector_length elements, within error_bound per element.
  std::vector<float> sum;
  // Clients whose inputs are in the sum (U3), ascending.
  std::vector<uint32_t> contributors;
  // Clients that shared keys but sent no masked input (U2 \ U3), ascending.
  std::vector<uint32_t> dropped_after_sharing;
  // secagg::ErrorBound(cohort_size, clip_norm, bits).
  double error_bound = 0;
  // The unmasked sum in the ring: vector_length elements mod 2^bits, the integers `sum` decodes
  // (secagg::Dequantize), exactly the sum of the contributors' quantised inputs.
  std::vector<uint32_t> ring_sum;
  uint32_t bits = 32;  // b of the ring Z_2^b
  // Responders one of whose revealed shares did not fit its secret's commitment or public key
  // and was set aside (possible when more than t shares of that secret arrived), ascending.
  std::vector<uint32_t> rejected_share_senders;
  // Clients whose masked input arrived but was left out of the sum because a neighbour could
  // not authenticate their share (also in dropped_after_sharing), ascending.
  std::vector<uint32_t> left_out;
};

class SecAggServer {
 public:
  // Errors: those of ResolveParams.
  [[nodiscard]] static absl::StatusOr<SecAggServer> Create(
      const fedsched::v1::SecAggRoundParams& params);

  // Step 0, one advertisement, from the member whose identity the caller bound to
  // `signing_public_key` (the device's Ed25519 key, 32 bytes; Bonawitz et al., CCS 2017,
  // section 6). It is kept with its signature and forwarded so to the neighbours. Errors:
  // wrong round, a sender outside the cohort or repeated, keys or commitment not 32 bytes, a
  // message above kMaxAdvertiseBytes (INVALID_ARGUMENT); UNAUTHENTICATED when its signing key is
  // not `signing_public_key` (or none is bound) or its signature does not verify.
  [[nodiscard]] absl::Status AddAdvertisement(const fedsched::v1::SecAggAdvertise& advertisement,
                                              absl::string_view signing_public_key);
  // Closes step 0: the advertisers are U1 (at least t, else failed precondition); returns one
  // key directory per advertiser with its advertised neighbours.
  [[nodiscard]] absl::StatusOr<std::vector<fedsched::v1::SecAggKeyDirectory>> CloseAdvertisements();

  // Step 1, one client's sealed shares. Its unverified_advertisers (neighbours whose signature
  // it could not verify) count as accusations (accusations()): their shares are not routed to
  // it, and they are left out of the sum at step 2's close. Errors: wrong round, a sender not in
  // U1 or repeated, a share addressed to a non-neighbour, to an unverified advertiser, repeated
  // or not from the message's sender, not exactly one share per verified advertised neighbour,
  // an unverified advertiser that is not an advertised neighbour or not ascending, a sealed
  // share above kMaxSealedShareBytes or a message above MaxShareKeysBytes(degree).
  [[nodiscard]] absl::Status AddShareKeys(const fedsched::v1::SecAggShareKeys& message);
  // Closes step 1: the senders are U2 (at least t, else failed precondition); returns, for each
  // member of U2, the sealed shares addressed to it by other members of U2.
  [[nodiscard]] absl::StatusOr<std::vector<fedsched::v1::SecAggRoutedShares>> CloseShareKeys();

  // Step 2, one masked input, held until step 2 closes with the neighbours it reports in
  // unauthenticated_senders (their shares to it did not open: it did not mask with them).
  // Below 32 bits per element the input is packed (packed_masked) and unpacked here.
  // Errors: wrong round, a sender not in U2 or already counted, a wrong length (or packed size,
  // or the form of the other bit width), a message above MaxMaskedInputBytes, a reported sender
  // that is not a neighbour in U2 or not ascending. Held inputs cost 4 x vector_length bytes
  // each until RequestUnmasking folds them.
  [[nodiscard]] absl::Status AddMaskedInput(const fedsched::v1::SecAggMaskedInput& input);
  // Step 2, a masked partial sum from an aggregator (hierarchy): counts every sender as a
  // survivor and adds the sum. Errors: wrong round or length, no sender, a sender not in U2,
  // repeated or already counted (nothing is added then).
  [[nodiscard]] absl::Status AddMaskedPartialSum(
      const fedsched::v1::SecAggMaskedPartialSum& partial);
  // Closes step 2. Every sender reported by a neighbour as unauthenticated is left out (its input
  // discarded unread), whoever reported it, so that all survivors unmask one consistent set;
  // the other senders are U3, and their inputs are summed. A left-out member counts as dropped
  // after sharing: survivors that opened its share reveal their shares of its mask key (Bonawitz
  // et al., round 4), those that did not open it are not asked. Returns one unmask request per
  // survivor. Errors (failed precondition): fewer than t survivors, a secret to rebuild with
  // fewer than t surviving holders of a share that opened, or a left-out sender inside an
  // aggregator's partial sum.
  [[nodiscard]] absl::StatusOr<std::vector<fedsched::v1::SecAggUnmaskRequest>> RequestUnmasking();

  // Step 3, one survivor's revealed shares. Errors: wrong round, a sender not in U3 or
  // repeated, a share not asked for or malformed, a message above MaxUnmaskResponseBytes.
  [[nodiscard]] absl::Status AddUnmaskResponse(const fedsched::v1::SecAggUnmaskResponse& response);
  // Closes step 3: rebuilds the survivors' self-mask seeds and the dropped clients' mask keys,
  // checks each against its commitment / public key (with more than t shares, one share that
  // does not fit is set aside and its sender reported), removes the masks and decodes the sum.
  // Errors: failed precondition below t responders or t shares of a secret; data loss when no
  // t of a secret's shares rebuild it (tampered shares).
  [[nodiscard]] absl::StatusOr<UnmaskedSum> CloseUnmasking();

  // Whole steps from batches: Add* for each message, then Close*; the first error fails the
  // round. CollectAdvertisements checks each signature against the advertisement's own key (no
  // identity binds keys in a batch: tests and in-process runs).
  [[nodiscard]] absl::StatusOr<std::vector<fedsched::v1::SecAggKeyDirectory>> CollectAdvertisements(
      absl::Span<const fedsched::v1::SecAggAdvertise> advertisements);
  [[nodiscard]] absl::StatusOr<std::vector<fedsched::v1::SecAggRoutedShares>> RouteShares(
      absl::Span<const fedsched::v1::SecAggShareKeys> share_messages);
  [[nodiscard]] absl::StatusOr<UnmaskedSum> Unmask(
      absl::Span<const fedsched::v1::SecAggUnmaskResponse> responses);

  // Reports received so far, with the share messages (advertisements whose signature did not
  // verify) and the masked inputs (shares that did not authenticate): client -> the members
  // that reported it. The round engine charges the failure to the client.
  const absl::btree_map<uint32_t, absl::btree_set<uint32_t>>& accusations() const {
    return accusers_;
  }
  // Of them, the clients reported at step 1 for an advertisement whose signature did not verify.
  const absl::btree_set<uint32_t>& unverified() const { return unverified_; }

 private:
  enum class Step { kAdvertise, kRoute, kMasked, kUnmask, kDone };
  explicit SecAggServer(RoundSetup setup) : setup_(std::move(setup)) {}

  [[nodiscard]] absl::Status CheckStep(Step expected, absl::string_view name) const;
  // Checks a step-2 message: round, senders (in U2, not yet counted, each once) and length.
  [[nodiscard]] absl::Status CheckMasked(uint64_t round_id, absl::Span<const uint32_t> senders,
                                         size_t length, absl::string_view what) const;
  void Fold(absl::Span<const uint32_t> senders, const uint32_t* masked);
  // The reported senders of a masked input are neighbours in U2, ascending.
  [[nodiscard]] absl::Status CheckAccusations(const fedsched::v1::SecAggMaskedInput& input) const;
  // The unverified advertisers a share message reports are advertised neighbours, ascending.
  [[nodiscard]] absl::Status CheckUnverified(const fedsched::v1::SecAggShareKeys& message) const;
  // Whether survivor r masked with v (v shared keys, is r's neighbour, and r opened its share):
  // then r holds a share of v's secrets.
  bool MaskedWith(uint32_t r, uint32_t v) const;
  // Step 2's close: leaves out the reported senders, fixes U3 and folds the held inputs.
  [[nodiscard]] absl::Status SettleSurvivors();
  // Holders of `owner`'s shares that are in `among`: owner itself and its neighbours.
  std::vector<uint32_t> HoldersIn(uint32_t owner, const absl::btree_set<uint32_t>& among) const;
  // Whether `secret` is `owner`'s mask private key (mask_key) or self-mask seed, by its
  // advertised public key or commitment.
  bool Verifies(uint32_t owner, bool mask_key, const Bytes32& secret) const;
  [[nodiscard]] absl::StatusOr<absl::btree_map<uint32_t, Bytes32>> Rebuild(bool mask_keys);
  [[nodiscard]] absl::Status RemoveMasks(const absl::btree_map<uint32_t, Bytes32>& seeds,
                                         const absl::btree_map<uint32_t, Bytes32>& keys);

  RoundSetup setup_;
  Step step_ = Step::kAdvertise;
  absl::btree_map<uint32_t, fedsched::v1::SecAggAdvertise> advertised_;  // U1
  // Step 1's messages until it closes (sealed shares, a few hundred bytes per neighbour).
  absl::btree_map<uint32_t, fedsched::v1::SecAggShareKeys> share_messages_;
  absl::btree_set<uint32_t> shared_;     // U2
  absl::btree_set<uint32_t> received_;   // senders of masked inputs and partial sums
  absl::btree_set<uint32_t> folded_;     // of them, inside partial sums (cannot be left out)
  absl::btree_set<uint32_t> excluded_;   // of them, left out for unauthenticated shares
  absl::btree_set<uint32_t> survivors_;  // U3 = received_ \ excluded_, fixed at step 2's close
  // Masked inputs held until step 2 closes, by sender; and client -> its accusers.
  absl::btree_map<uint32_t, std::vector<uint32_t>> inputs_;
  absl::btree_map<uint32_t, absl::btree_set<uint32_t>> accusers_;
  absl::btree_set<uint32_t> unverified_;  // reported at step 1 (their signature failed)
  absl::btree_set<uint32_t> dropped_;    // U2 \ U3 whose mask keys must be rebuilt
  std::vector<uint32_t> masked_sum_;     // sum of the masked inputs, Z_2^32
  // Step 3's responses until it closes (field elements, tens of bytes per share).
  absl::btree_map<uint32_t, fedsched::v1::SecAggUnmaskResponse> responses_;
  absl::btree_set<uint32_t> rejected_;  // responders with a share set aside
};

}  // namespace fedsched::secagg

#endif  // FEDSCHED_SECAGG_SERVER_H_

// Step-by-step protocol tests: tampered, replayed and misrouted shares drop their sender (a
// malicious member costs the round nothing while t survive), the server never asks for both
// secrets of a client, message sizes are bounded by the graph, and what the server receives is
// masked.
#include "secagg/protocol.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/unknown_field_set.h"
#include "gtest/gtest.h"
#include "secagg/client.h"
#include "secagg/packing.h"
#include "secagg/partial_sum.h"
#include "secagg/quantize.h"
#include "secagg/server.h"
#include "secagg/shamir.h"
#include "tests/secagg/test_util.h"

namespace fedsched::secagg {
namespace {

using ::fedsched::secagg::testing::Identity;
using ::fedsched::secagg::testing::Params;
using ::fedsched::secagg::testing::Updates;
using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace fedsched::v1;

// The server has no entry point for a plain update: its only input of vector data is a
// SecAggMaskedInput, which a float vector does not convert to.
static_assert(!std::is_invocable_v<decltype(&SecAggServer::AddMaskedInput), SecAggServer&,
                                   const std::vector<float>&>);
static_assert(!std::is_convertible_v<std::vector<float>, SecAggMaskedInput>);

// A round driven by hand up to the routed shares (steps 0 and 1 done).
struct Handheld {
  // `tamper` may change the share messages before the server routes them, `relay` the key
  // directories before the clients read them (a relay or channel tampering with them).
  Handheld(const SecAggRoundParams& p, uint8_t entropy = 1,
           const std::function<void(std::vector<SecAggShareKeys>&)>& tamper = nullptr,
           const std::function<void(std::vector<SecAggKeyDirectory>&)>& relay = nullptr)
      : server(*SecAggServer::Create(p)) {
    for (uint32_t i = 0; i < p.cohort_size(); ++i) {
      Bytes32 e{};
      e[0] = entropy;
      e[1] = static_cast<uint8_t>(i);
      clients.push_back(*SecAggClient::Create(p, i, e, Identity(i)));
      adverts.push_back(*clients.back().Advertise());
    }
    directories = *server.CollectAdvertisements(adverts);
    if (relay) relay(directories);
    for (uint32_t i = 0; i < p.cohort_size(); ++i) {
      shares.push_back(*clients[i].ShareKeys(directories[i]));
    }
    if (tamper) tamper(shares);
    routed = *server.RouteShares(shares);
  }
  SecAggServer server;
  std::vector<SecAggClient> clients;
  std::vector<SecAggAdvertise> adverts;
  std::vector<SecAggKeyDirectory> directories;
  std::vector<SecAggShareKeys> shares;
  std::vector<SecAggRoutedShares> routed;
};

int ShareFrom(const SecAggRoutedShares& r, uint32_t sender) {
  for (int k = 0; k < r.shares_size(); ++k) {
    if (r.shares(k).sender() == sender) return k;
  }
  return -1;
}

// A share that does not authenticate drops its sender for the receiver: no abort, and the
// sender is reported with the masked input.
TEST(ProtocolTest, TamperedShareDropsItsSender) {
  const auto p = Params(5, 8);
  Handheld h(p);
  const int k = ShareFrom(h.routed[0], 2);
  ASSERT_GE(k, 0);
  (*h.routed[0].mutable_shares(k)->mutable_ciphertext())[20] ^= 0x40;
  const std::vector<float> update(8, 0.1f);
  ASSERT_OK_AND_ASSIGN(SecAggMaskedInput masked, h.clients[0].MaskInput(h.routed[0], update, 1.0));
  EXPECT_THAT(masked.unauthenticated_senders(), ::testing::ElementsAre(2u));
}

TEST(ProtocolTest, ReplayedShareFromAnotherRoundIsRejected) {
  // Same entropy in both rounds, so the clients even draw the same keys: only the round id
  // bound into the key derivation and the associated data tells the shares apart.
  Handheld round7(Params(5, 8, 7), 9);
  Handheld round8(Params(5, 8, 8), 9);
  const int k7 = ShareFrom(round7.routed[0], 3);
  const int k8 = ShareFrom(round8.routed[0], 3);
  ASSERT_GE(k7, 0);
  ASSERT_GE(k8, 0);
  *round8.routed[0].mutable_shares(k8) = round7.routed[0].shares(k7);
  const std::vector<float> update(8, 0.1f);
  ASSERT_OK_AND_ASSIGN(SecAggMaskedInput masked,
                       round8.clients[0].MaskInput(round8.routed[0], update, 1.0));
  EXPECT_THAT(masked.unauthenticated_senders(), ::testing::ElementsAre(3u));
}

TEST(ProtocolTest, MisroutedShareIsRejected) {
  const auto p = Params(5, 8);
  const std::vector<float> update(8, 0.1f);
  {
    Handheld h(p);  // a share addressed to client 0 handed to client 1 as is
    *h.routed[1].mutable_shares(0) = h.routed[0].shares(ShareFrom(h.routed[0], 2));
    EXPECT_THAT(h.clients[1].MaskInput(h.routed[1], update, 1.0),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("was routed here")));
  }
  {
    Handheld h(p);  // the same with its receiver field rewritten: the AEAD catches it
    SecAggEncryptedShare moved = h.routed[0].shares(ShareFrom(h.routed[0], 2));
    moved.set_receiver(1);
    *h.routed[1].mutable_shares(ShareFrom(h.routed[1], 2)) = moved;
    ASSERT_OK_AND_ASSIGN(SecAggMaskedInput masked, h.clients[1].MaskInput(h.routed[1], update, 1));
    EXPECT_THAT(masked.unauthenticated_senders(), ::testing::ElementsAre(2u));
  }
}

// Random bytes in place of `attacker`'s sealed shares to the receivers in `to` (all if empty),
// as a malicious member would send them: right count and addressing, nothing that opens.
std::function<void(std::vector<SecAggShareKeys>&)> ForgeShares(uint32_t attacker,
                                                               std::set<uint32_t> to = {}) {
  return [attacker, to](std::vector<SecAggShareKeys>& messages) {
    std::mt19937 rng(attacker + 17);
    for (SecAggEncryptedShare& share : *messages[attacker].mutable_shares()) {
      if (!to.empty() && !to.contains(share.receiver())) continue;
      for (char& c : *share.mutable_ciphertext()) c = static_cast<char>(rng());
    }
  };
}

// Runs h to the end with every member but those in `absent` sending its masked input (the
// members in `first` before the others) and answering; checks the sum is that of the
// contributors' updates.
absl::StatusOr<UnmaskedSum> FinishRound(Handheld& h, const std::vector<uint32_t>& first,
                                        uint64_t length, const std::set<uint32_t>& absent = {}) {
  const auto updates = Updates(h.clients.size(), length, 5);
  std::vector<uint32_t> order = first;
  for (uint32_t i = 0; i < h.clients.size(); ++i) {
    if (std::find(first.begin(), first.end(), i) == first.end() && !absent.contains(i)) {
      order.push_back(i);
    }
  }
  for (uint32_t i : order) {
    FEDSCHED_ASSIGN_OR_RETURN(SecAggMaskedInput masked,
                              h.clients[i].MaskInput(h.routed[i], updates[i], 1.0));
    FEDSCHED_RETURN_IF_ERROR(h.server.AddMaskedInput(masked));
  }
  FEDSCHED_ASSIGN_OR_RETURN(auto requests, h.server.RequestUnmasking());
  for (const auto& request : requests) {
    FEDSCHED_ASSIGN_OR_RETURN(auto response, h.clients[request.recipient()].Unmask(request));
    FEDSCHED_RETURN_IF_ERROR(h.server.AddUnmaskResponse(response));
  }
  FEDSCHED_ASSIGN_OR_RETURN(UnmaskedSum sum, h.server.CloseUnmasking());
  for (uint64_t e = 0; e < length; ++e) {
    double truth = 0;
    for (uint32_t i : sum.contributors) truth += updates[i][e];
    if (std::abs(sum.sum[e] - truth) > sum.error_bound) {
      return absl::InternalError(absl::StrCat("element ", e, ": ", sum.sum[e], " vs ", truth));
    }
  }
  return sum;
}

// The finding of a malicious member: random bytes as its sealed shares made every honest
// neighbour abort. Now each neighbour drops it and reports it, the server leaves it out for
// everyone (its input arrives first and is still discarded), and the round unmasks the others.
TEST(ProtocolTest, ForgedSharesDropTheirSenderAndTheSurvivorsUnmask) {
  const auto p = Params(5, 8);  // complete graph, k = 4, t = 3
  Handheld h(p, 1, ForgeShares(4));
  ASSERT_OK_AND_ASSIGN(UnmaskedSum sum, FinishRound(h, {4}, 8));
  EXPECT_EQ(sum.contributors, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(sum.left_out, std::vector<uint32_t>{4});
  ASSERT_TRUE(h.server.accusations().contains(4));
  EXPECT_THAT(h.server.accusations().at(4), ::testing::ElementsAre(0u, 1u, 2u, 3u));
  EXPECT_EQ(h.server.accusations().size(), 1u);
}

// Forged shares to some neighbours only: those that opened the share masked with the sender
// and reveal their shares of its mask key, so the server removes their masks with it; those
// that could not are not asked. Sparse graph (n = 30, k = 16, t = 9).
TEST(ProtocolTest, ForgedSharesToSomeNeighboursAreSurvived) {
  const auto p = Params(30, 6);
  const uint32_t attacker = 5;
  const RoundSetup setup = *ResolveParams(p);
  const CommunicationGraph& graph = setup.graph;
  const std::vector<uint32_t> neighbours = graph.Neighbours(attacker);
  const std::set<uint32_t> forged_to(neighbours.begin(), neighbours.begin() + 3);
  Handheld h(p, 2, ForgeShares(attacker, forged_to));
  ASSERT_OK_AND_ASSIGN(UnmaskedSum sum, FinishRound(h, {}, 6));
  EXPECT_EQ(sum.contributors.size(), 29u);
  EXPECT_EQ(sum.left_out, std::vector<uint32_t>{attacker});
  EXPECT_EQ(h.server.accusations().at(attacker),
            absl::btree_set<uint32_t>(forged_to.begin(), forged_to.end()));
}

// A relay that swaps member 4's advertised mask key in every directory (to learn its pairwise
// masks) is caught by each neighbour's signature check: 4 is treated as dropped, as for a share
// that does not authenticate (no share sealed to its keys, none of its shares taken), reported
// with the share messages, left out by the server, and the others unmask.
TEST(ProtocolTest, TamperedAdvertisementIsDroppedByItsNeighbours) {
  const auto p = Params(5, 8);  // complete graph, k = 4, t = 3
  const auto swap_key = [](std::vector<SecAggKeyDirectory>& directories) {
    for (SecAggKeyDirectory& d : directories) {
      for (SecAggAdvertise& ad : *d.mutable_neighbours()) {
        if (ad.sender() == 4) ad.set_mask_public_key(std::string(32, '\x09'));
      }
    }
  };
  Handheld h(p, 1, nullptr, swap_key);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_THAT(h.shares[i].unverified_advertisers(), ::testing::ElementsAre(4u));
    EXPECT_EQ(h.shares[i].shares_size(), 3) << "no share sealed to the unverified keys";
    EXPECT_EQ(ShareFrom(h.routed[i], 4), -1) << "4's share is not routed to " << i;
  }
  // Every neighbour dropped 4, so 4 holds too few shares to mask and drops itself.
  const std::vector<float> update(8, 0.0f);
  EXPECT_THAT(
      h.clients[4].MaskInput(h.routed[4], update, 1.0),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("fewer than the threshold")));
  ASSERT_OK_AND_ASSIGN(UnmaskedSum sum, FinishRound(h, {}, 8, /*absent=*/{4}));
  EXPECT_EQ(sum.contributors, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_THAT(h.server.accusations().at(4), ::testing::ElementsAre(0u, 1u, 2u, 3u));
  EXPECT_THAT(h.server.unverified(), ::testing::ElementsAre(4u));
}

// Tampering with one neighbour's view only (sparse graph): that neighbour alone drops the
// member, the server leaves the member out for all, and the round still unmasks the rest.
TEST(ProtocolTest, AdvertisementTamperedForOneNeighbourLeavesItsSenderOut) {
  const auto p = Params(30, 6);
  const uint32_t victim = 7;
  const uint32_t target = ResolveParams(p)->graph.Neighbours(victim).front();
  Handheld h(p, 3, nullptr, [&](std::vector<SecAggKeyDirectory>& directories) {
    for (SecAggAdvertise& ad : *directories[target].mutable_neighbours()) {
      if (ad.sender() == victim) ad.mutable_signature()->front() ^= 1;
    }
  });
  EXPECT_THAT(h.shares[target].unverified_advertisers(), ::testing::ElementsAre(victim));
  ASSERT_OK_AND_ASSIGN(UnmaskedSum sum, FinishRound(h, {}, 6));
  EXPECT_EQ(sum.contributors.size(), 29u);
  EXPECT_EQ(sum.left_out, std::vector<uint32_t>{victim});
}

// The server takes an advertisement only with the key bound to its sender's identity and a
// signature that verifies: one signed with another member's key, with a key of the member's own
// making, or with a forged signature is UNAUTHENTICATED and the sender counts as dropped.
TEST(ProtocolTest, ServerRefusesAdvertisementsNotSignedWithTheBoundKey) {
  const auto p = Params(5, 8);
  ASSERT_OK_AND_ASSIGN(SecAggServer server, SecAggServer::Create(p));
  std::vector<SecAggAdvertise> ads;
  for (uint32_t i = 0; i < 5; ++i) {
    ASSERT_OK_AND_ASSIGN(
        SecAggClient client,
        SecAggClient::Create(p, i, Bytes32{static_cast<uint8_t>(i + 1)}, Identity(i)));
    ads.push_back(*client.Advertise());
  }
  const std::string bound0 = Identity(0).signing_key.public_key();
  // Member 0's advertisement made and signed by member 1 (speaking for 0 with its own key).
  ASSERT_OK_AND_ASSIGN(SecAggClient impostor, SecAggClient::Create(p, 0, Bytes32{42}, Identity(1)));
  ASSERT_OK_AND_ASSIGN(SecAggAdvertise as_zero, impostor.Advertise());
  EXPECT_THAT(server.AddAdvertisement(as_zero, bound0),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("other than the one bound")));
  // The bound key named, but the signature forged (the keys were swapped after signing).
  SecAggAdvertise forged = as_zero;
  forged.set_signing_public_key(bound0);
  EXPECT_THAT(server.AddAdvertisement(forged, bound0),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("does not verify")));
  // No key bound to the identity: refused whatever is signed.
  EXPECT_THAT(server.AddAdvertisement(ads[0], ""),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("no signing key bound")));
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_OK(server.AddAdvertisement(ads[i], Identity(i).signing_key.public_key()));
  }
  ASSERT_OK_AND_ASSIGN(auto directories, server.CloseAdvertisements());
  for (const SecAggAdvertise& ad : directories[1].neighbours()) {
    EXPECT_EQ(ad.signature().size(), kSignatureBytes) << "forwarded with its signature";
    EXPECT_OK(VerifyAdvertisement(p, ad));
  }
}

// The signature covers the round (id and graph seed), the sender's index and client id, both
// X25519 keys, the commitment and the signing key: changing any of them breaks it.
TEST(ProtocolTest, AdvertisementSignatureBindsRoundSenderAndKeys) {
  const auto p = Params(5, 8);
  ASSERT_OK_AND_ASSIGN(SecAggClient client, SecAggClient::Create(p, 2, Bytes32{3}, Identity(2)));
  ASSERT_OK_AND_ASSIGN(const SecAggAdvertise ad, client.Advertise());
  EXPECT_EQ(ad.signer_id(), "member-2");
  EXPECT_EQ(ad.signing_public_key(), Identity(2).signing_key.public_key());
  ASSERT_OK(VerifyAdvertisement(p, ad));
  std::vector<std::function<void(SecAggAdvertise&)>> edits = {
      [](SecAggAdvertise& a) { a.set_sender(3); },
      [](SecAggAdvertise& a) { a.set_signer_id("member-3"); },
      [](SecAggAdvertise& a) { a.mutable_cipher_public_key()->back() ^= 1; },
      [](SecAggAdvertise& a) { a.mutable_mask_public_key()->front() ^= 1; },
      [](SecAggAdvertise& a) { a.mutable_self_seed_commitment()->front() ^= 1; },
      [](SecAggAdvertise& a) { a.set_signing_public_key(Identity(3).signing_key.public_key()); },
  };
  for (size_t k = 0; k < edits.size(); ++k) {
    SecAggAdvertise changed = ad;
    edits[k](changed);
    EXPECT_THAT(VerifyAdvertisement(p, changed),
                StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_))
        << "edit " << k;
  }
  EXPECT_THAT(VerifyAdvertisement(Params(5, 8, /*round=*/8), ad),
              StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  SecAggRoundParams other_attempt = p;
  other_attempt.set_graph_seed(std::string(32, '\x01'));
  EXPECT_THAT(VerifyAdvertisement(other_attempt, ad),
              StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
}

// Left out below the threshold: the round fails cleanly, naming the count, and the accusations
// stay readable for charging the failure.
TEST(ProtocolTest, LeavingOutBelowThresholdFailsTheRound) {
  const auto p = Params(5, 4);  // k = 4, t = 3; 0 and 1 drop before their masked inputs
  Handheld h(p, 1, ForgeShares(4));
  EXPECT_THAT(FinishRound(h, {}, 4, {0, 1}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("2 clients sent masked inputs and were not left out")));
  ASSERT_EQ(h.server.accusations().size(), 1u);
  EXPECT_THAT(h.server.accusations().at(4), ::testing::ElementsAre(2u, 3u));
}

// Random forgers and random dropouts before the masked input, over complete and sparse graphs:
// the round either unmasks exactly the sum of the members nobody reported, or fails cleanly below
// the threshold; never a wrong sum, never a tampered-share failure. A forger forges to all its
// neighbours, to one, or to a random half: the last fails the round when fewer than t of the
// neighbours that opened its share remain to rebuild its mask key.
TEST(ProtocolTest, RandomForgersAndDropoutsUnmaskOrFailCleanly) {
  int unmasked = 0;
  for (const uint32_t n : {5u, 8u, 14u, 30u}) {
    for (uint32_t seed = 0; seed < 6; ++seed) {
      SCOPED_TRACE(absl::StrCat("n ", n, " seed ", seed));
      const auto p = Params(n, 5, 40 + seed);
      const RoundSetup setup = *ResolveParams(p);
      std::mt19937 rng(seed * 131 + n);
      std::set<uint32_t> forgers = {static_cast<uint32_t>(rng() % n)};
      if (seed % 2 == 1) forgers.insert(static_cast<uint32_t>(rng() % n));
      std::set<uint32_t> absent;
      for (uint32_t k = 0; k < seed % 3; ++k) absent.insert(static_cast<uint32_t>(rng() % n));
      std::vector<std::set<uint32_t>> forged_to(n);
      for (uint32_t f : forgers) {
        const std::vector<uint32_t>& neighbours = setup.graph.Neighbours(f);
        for (uint32_t j : neighbours) {
          if (seed % 3 == 0 || (seed % 3 == 2 && rng() % 2 == 0)) forged_to[f].insert(j);
        }
        if (forged_to[f].empty()) forged_to[f].insert(neighbours[rng() % neighbours.size()]);
      }
      Handheld h(p, static_cast<uint8_t>(seed + 3), [&](std::vector<SecAggShareKeys>& m) {
        for (uint32_t f : forgers) ForgeShares(f, forged_to[f])(m);
      });
      const auto updates = Updates(n, 5, seed);
      std::set<uint32_t> reported;
      for (uint32_t i = 0; i < n; ++i) {
        if (absent.contains(i)) continue;
        // A member left with fewer than t holders refuses to mask: it drops.
        absl::StatusOr<SecAggMaskedInput> masked =
            h.clients[i].MaskInput(h.routed[i], updates[i], 1.0);
        if (!masked.ok()) {
          EXPECT_THAT(masked,
                      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("threshold")));
          continue;
        }
        for (uint32_t v : masked->unauthenticated_senders()) {
          EXPECT_TRUE(forgers.contains(v)) << v;
          reported.insert(v);
        }
        ASSERT_THAT(h.server.AddMaskedInput(*masked), IsOk());
      }
      absl::StatusOr<std::vector<SecAggUnmaskRequest>> requests = h.server.RequestUnmasking();
      if (!requests.ok()) {
        EXPECT_THAT(requests,
                    StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("threshold")));
        continue;
      }
      for (const auto& request : *requests) {
        ASSERT_OK_AND_ASSIGN(auto response, h.clients[request.recipient()].Unmask(request));
        ASSERT_THAT(h.server.AddUnmaskResponse(response), IsOk());
      }
      ASSERT_OK_AND_ASSIGN(UnmaskedSum sum, h.server.CloseUnmasking());
      ++unmasked;
      for (uint32_t v : sum.contributors) EXPECT_FALSE(reported.contains(v)) << v;
      for (int e = 0; e < 5; ++e) {
        double truth = 0;
        for (uint32_t i : sum.contributors) truth += updates[i][e];
        EXPECT_NEAR(sum.sum[e], truth, sum.error_bound) << "element " << e;
      }
    }
  }
  EXPECT_EQ(unmasked, 16);  // forging to all neighbours or to one is survived (16 of 24)
}

TEST(ProtocolTest, ReportsOfNonNeighboursAreRefused) {
  const auto p = Params(30, 4);
  Handheld h(p);
  const RoundSetup setup = *ResolveParams(p);
  const CommunicationGraph& graph = setup.graph;
  uint32_t stranger = 1;
  while (graph.Adjacent(0, stranger)) ++stranger;
  ASSERT_OK_AND_ASSIGN(SecAggMaskedInput masked,
                       h.clients[0].MaskInput(h.routed[0], std::vector<float>(4, 0.1f), 1.0));
  masked.add_unauthenticated_senders(stranger);
  EXPECT_THAT(h.server.AddMaskedInput(masked),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("did not authenticate")));
}

// A share message is bounded by its sender's neighbourhood: exactly one sealed share per
// advertised neighbour (the finding: 200,000 shares, 4.7 MB, were accepted), each of bounded
// size, and the whole message within MaxShareKeysBytes.
TEST(ProtocolTest, ShareMessagesAreBoundedByTheGraph) {
  const auto p = Params(5, 8);
  auto server = *SecAggServer::Create(p);
  std::vector<SecAggClient> clients;
  std::vector<SecAggAdvertise> adverts;
  for (uint32_t i = 0; i < 5; ++i) {
    clients.push_back(
        *SecAggClient::Create(p, i, Bytes32{static_cast<uint8_t>(i + 1)}, Identity(i)));
    adverts.push_back(*clients[i].Advertise());
  }
  ASSERT_OK_AND_ASSIGN(auto directories, server.CollectAdvertisements(adverts));
  ASSERT_OK_AND_ASSIGN(SecAggShareKeys real, clients[0].ShareKeys(directories[0]));
  SecAggShareKeys flood = real;
  while (flood.shares_size() < 200000) *flood.add_shares() = real.shares(0);
  EXPECT_GT(flood.ByteSizeLong(), 4'000'000u);
  EXPECT_THAT(server.AddShareKeys(flood),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sent 200000 shares; it has 4 advertised neighbours")));
  SecAggShareKeys repeated = real;
  *repeated.mutable_shares(1) = real.shares(0);
  EXPECT_THAT(server.AddShareKeys(repeated),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("or repeated")));
  SecAggShareKeys fat = real;
  fat.mutable_shares(2)->mutable_ciphertext()->append(4096, 'x');
  EXPECT_THAT(server.AddShareKeys(fat),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bytes, above")));
  SecAggShareKeys padded = real;  // unknown fields are kept by proto3: the total is bounded
  padded.GetReflection()->MutableUnknownFields(&padded)->AddLengthDelimited(
      999, std::string(1 << 20, 'x'));
  EXPECT_THAT(server.AddShareKeys(padded),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("its neighbourhood allows")));
  EXPECT_THAT(server.AddShareKeys(real), IsOk());
}

TEST(ProtocolTest, ServerRefusesStaleAndRepeatedMessages) {
  const auto p = Params(4, 8);
  Handheld h(p);
  const std::vector<float> update(8, 0.1f);
  ASSERT_OK_AND_ASSIGN(SecAggMaskedInput masked, h.clients[0].MaskInput(h.routed[0], update, 1));
  SecAggMaskedInput stale = masked;
  stale.set_round_id(6);
  EXPECT_THAT(h.server.AddMaskedInput(stale),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("round 6")));
  EXPECT_THAT(h.server.AddMaskedInput(masked), IsOk());
  EXPECT_THAT(h.server.AddMaskedInput(masked),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("already sent one")));
}

// Drives h to the unmask step with clients in `absent` not sending masked inputs.
std::vector<SecAggUnmaskRequest> ToUnmask(Handheld& h, const std::vector<uint32_t>& absent,
                                          uint64_t length) {
  const auto updates = Updates(h.clients.size(), length, 3);
  for (uint32_t i = 0; i < h.clients.size(); ++i) {
    if (std::find(absent.begin(), absent.end(), i) != absent.end()) continue;
    auto masked = h.clients[i].MaskInput(h.routed[i], updates[i], 1.0);
    EXPECT_TRUE(masked.ok()) << masked.status();
    EXPECT_THAT(h.server.AddMaskedInput(*masked), IsOk());
  }
  auto requests = h.server.RequestUnmasking();
  EXPECT_TRUE(requests.ok()) << requests.status();
  return *requests;
}

// Messages arrive one at a time: a bad one is refused for its sender alone, who then counts
// as dropped, and the round completes without it.
TEST(ProtocolTest, ABadMessageDropsItsSenderNotTheRound) {
  const auto p = Params(5, 8);
  ASSERT_OK_AND_ASSIGN(SecAggServer server, SecAggServer::Create(p));
  std::vector<SecAggClient> clients;
  for (uint32_t i = 0; i < 5; ++i) {
    clients.push_back(
        *SecAggClient::Create(p, i, Bytes32{static_cast<uint8_t>(i + 1)}, Identity(i)));
    ASSERT_OK_AND_ASSIGN(SecAggAdvertise ad, clients[i].Advertise());
    if (i == 4) ad.set_round_id(p.round_id() + 1);  // replayed or stale
    const absl::Status added = server.AddAdvertisement(ad, ad.signing_public_key());
    EXPECT_EQ(added.ok(), i != 4) << added;
  }
  ASSERT_OK_AND_ASSIGN(auto directories, server.CloseAdvertisements());
  ASSERT_EQ(directories.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(auto shares, clients[i].ShareKeys(directories[i]));
    ASSERT_THAT(server.AddShareKeys(shares), IsOk());
  }
  ASSERT_OK_AND_ASSIGN(auto routed, server.CloseShareKeys());
  const auto updates = Updates(5, 8, 2);
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(auto masked, clients[i].MaskInput(routed[i], updates[i], 1.0));
    ASSERT_THAT(server.AddMaskedInput(masked), IsOk());
  }
  ASSERT_OK_AND_ASSIGN(auto requests, server.RequestUnmasking());
  for (const auto& request : requests) {
    ASSERT_OK_AND_ASSIGN(auto response, clients[request.recipient()].Unmask(request));
    ASSERT_THAT(server.AddUnmaskResponse(response), IsOk());
    EXPECT_THAT(server.AddUnmaskResponse(response),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("already responded")));
  }
  ASSERT_OK_AND_ASSIGN(UnmaskedSum sum, server.CloseUnmasking());
  EXPECT_EQ(sum.contributors, (std::vector<uint32_t>{0, 1, 2, 3}));
  for (int e = 0; e < 8; ++e) {
    double truth = 0;
    for (uint32_t i = 0; i < 4; ++i) truth += updates[i][e];
    EXPECT_NEAR(sum.sum[e], truth, sum.error_bound);
  }
}

TEST(ProtocolTest, ServerNeverAsksForBothSecretsOfAClient) {
  const auto p = Params(30, 4);  // sparse: k = 16
  Handheld h(p);
  const auto requests = ToUnmask(h, {2, 11, 25}, 4);
  std::set<uint32_t> seeds, keys;
  for (const auto& r : requests) {
    seeds.insert(r.self_seed_of().begin(), r.self_seed_of().end());
    keys.insert(r.mask_key_of().begin(), r.mask_key_of().end());
  }
  for (uint32_t v : keys) EXPECT_FALSE(seeds.contains(v)) << v;
  EXPECT_EQ(keys, (std::set<uint32_t>{2, 11, 25}));
  EXPECT_EQ(seeds.size(), 27u);
}

TEST(ProtocolTest, ClientRefusesToRevealBothSecrets) {
  const auto p = Params(5, 4);
  Handheld h(p);
  auto requests = ToUnmask(h, {}, 4);
  requests[0].add_mask_key_of(requests[0].self_seed_of(1));
  EXPECT_THAT(h.clients[requests[0].recipient()].Unmask(requests[0]),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("both")));
}

TEST(ProtocolTest, ClientRefusesBelowThreshold) {
  const auto p = Params(5, 4);
  Handheld h(p);
  auto requests = ToUnmask(h, {}, 4);
  requests[1].set_survivors(p.threshold() - 1);
  EXPECT_THAT(h.clients[requests[1].recipient()].Unmask(requests[1]),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("refusing to unmask")));
}

// A tampered revealed share: with more than t shares of the secret it is set aside and its
// sender reported; with exactly t the round fails.
TEST(ProtocolTest, TamperedRevealedShareIsSetAsideOrFailsTheRound) {
  const auto p = Params(6, 4);  // complete graph, t = 4
  for (const size_t responders : {5u, 4u}) {
    Handheld h(p);
    const auto requests = ToUnmask(h, {4}, 4);
    std::vector<SecAggUnmaskResponse> responses;
    for (size_t k = 0; k < responders; ++k) {
      responses.push_back(*h.clients[requests[k].recipient()].Unmask(requests[k]));
    }
    auto* share = responses[0].mutable_self_seed_shares(0)->mutable_share();
    share->Set(1, (share->Get(1) + 1) % kFieldPrime);
    absl::StatusOr<UnmaskedSum> sum = h.server.Unmask(responses);
    SCOPED_TRACE(responders);
    if (responders == 5) {
      ASSERT_TRUE(sum.ok()) << sum.status();
      EXPECT_EQ(sum->rejected_share_senders, std::vector<uint32_t>{responses[0].sender()});
      const auto updates = Updates(6, 4, 3);
      for (int e = 0; e < 4; ++e) {
        double truth = 0;
        for (uint32_t i : sum->contributors) truth += updates[i][e];
        EXPECT_NEAR(sum->sum[e], truth, sum->error_bound);
      }
    } else {
      EXPECT_THAT(sum, StatusIs(absl::StatusCode::kDataLoss, HasSubstr("tampered share")));
    }
  }
}

TEST(ProtocolTest, ReplayedUnmaskResponseIsRejected) {
  const auto p = Params(5, 4);
  Handheld h(p);
  const auto requests = ToUnmask(h, {}, 4);
  std::vector<SecAggUnmaskResponse> responses;
  for (const auto& r : requests) responses.push_back(*h.clients[r.recipient()].Unmask(r));
  responses[2].set_round_id(p.round_id() - 1);
  EXPECT_THAT(h.server.Unmask(responses),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("replayed or stale")));
}

// Chi-square statistic of the top 4 bits of `v` against the uniform distribution.
double TopNibbleChiSquare(const std::vector<uint32_t>& v) {
  std::vector<double> bins(16, 0);
  for (uint32_t x : v) bins[x >> 28] += 1;
  const double expected = v.size() / 16.0;
  double chi = 0;
  for (double b : bins) chi += (b - expected) * (b - expected) / expected;
  return chi;
}

// What the server receives is statistically independent of the input: each masked input, and
// every partial sum short of the full one, is uniform over Z_2^32 (chi-square with 15 degrees
// of freedom; 45 is the 99.99th percentile), and decodes to nothing near the update.
TEST(ProtocolTest, ServerSeesOnlyMaskedVectors) {
  const uint64_t length = 20000;
  const auto p = Params(4, length);
  Handheld h(p);
  const auto updates = Updates(4, length, 17);
  std::vector<uint32_t> partial(length, 0);
  for (uint32_t i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto masked, h.clients[i].MaskInput(h.routed[i], updates[i], 1.0));
    const std::vector<uint32_t> m(masked.masked().begin(), masked.masked().end());
    EXPECT_LT(TopNibbleChiSquare(m), 45.0) << "client " << i;
    for (uint64_t e = 0; e < length; ++e) partial[e] += m[e];
    EXPECT_LT(TopNibbleChiSquare(partial), 45.0) << "sum of " << i + 1;
    const std::vector<float> decoded = Dequantize(m, *ChooseScale(4, 1.0));
    // Decoded, a masked input spreads over the whole range [-n C, n C] (mean |.| near n C / 2)
    // while the update's coordinates are about C / sqrt(length), and the two are uncorrelated.
    double gap = 0, dot = 0, dd = 0, uu = 0;
    for (uint64_t e = 0; e < length; ++e) {
      gap += std::fabs(decoded[e] - updates[i][e]);
      dot += decoded[e] * updates[i][e];
      dd += decoded[e] * decoded[e];
      uu += updates[i][e] * updates[i][e];
    }
    EXPECT_GT(gap / length, 0.4 * 4 * p.clip_norm());
    EXPECT_LT(std::fabs(dot / std::sqrt(dd * uu)), 0.05);
    ASSERT_THAT(h.server.AddMaskedInput(masked), IsOk());
  }
}

// Hierarchy: two aggregators fold their shards' masked inputs into partial sums, a third
// client uploads directly; the root unmasks the same sum, and refuses a sender counted twice.
TEST(ProtocolTest, MaskedPartialSumsFromAggregators) {
  const uint64_t length = 4000;
  const auto p = Params(7, length);
  Handheld h(p);
  const auto updates = Updates(7, length, 23);
  std::vector<SecAggMaskedInput> masked(7);
  for (uint32_t i = 0; i < 7; ++i) {
    if (i == 5) continue;  // drops before its masked input
    ASSERT_OK_AND_ASSIGN(masked[i], h.clients[i].MaskInput(h.routed[i], updates[i], 1.0));
  }
  MaskedPartialSum shard_a(p.round_id(), length), shard_b(p.round_id(), length);
  for (uint32_t i : {0u, 2u, 4u}) ASSERT_THAT(shard_a.Add(masked[i]), IsOk());
  for (uint32_t i : {1u, 3u}) ASSERT_THAT(shard_b.Add(masked[i]), IsOk());
  EXPECT_THAT(shard_b.Add(masked[3]),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("already sent")));
  // Client 6 uploads to the root directly and, through a faulty aggregator, again.
  ASSERT_THAT(h.server.AddMaskedInput(masked[6]), IsOk());
  MaskedPartialSum faulty(p.round_id(), length);
  for (uint32_t i : {0u, 6u}) ASSERT_THAT(faulty.Add(masked[i]), IsOk());
  EXPECT_THAT(h.server.AddMaskedPartialSum(faulty.Take()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("client 6")));
  const SecAggMaskedPartialSum a = shard_a.Take();
  const SecAggMaskedPartialSum b = shard_b.Take();
  EXPECT_EQ(shard_a.size(), 0u);
  EXPECT_LT(TopNibbleChiSquare({a.masked_sum().begin(), a.masked_sum().end()}), 45.0);
  ASSERT_THAT(h.server.AddMaskedPartialSum(a), IsOk());
  ASSERT_THAT(h.server.AddMaskedPartialSum(b), IsOk());
  EXPECT_THAT(h.server.AddMaskedPartialSum(b),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("already sent one")));
  ASSERT_OK_AND_ASSIGN(auto requests, h.server.RequestUnmasking());
  for (const auto& r : requests) {
    ASSERT_OK_AND_ASSIGN(auto response, h.clients[r.recipient()].Unmask(r));
    ASSERT_THAT(h.server.AddUnmaskResponse(response), IsOk());
  }
  ASSERT_OK_AND_ASSIGN(UnmaskedSum sum, h.server.CloseUnmasking());
  EXPECT_EQ(sum.contributors, (std::vector<uint32_t>{0, 1, 2, 3, 4, 6}));
  for (uint64_t e = 0; e < length; e += 97) {
    double truth = 0;
    for (uint32_t i : sum.contributors) truth += updates[i][e];
    ASSERT_NEAR(sum.sum[e], truth, sum.error_bound) << e;
  }
}

// Bits per element (docs/guides/SECURE_AGGREGATION.md "Bits per element"): at b = 32, 16, 12 and
// 8, the unmasked ring sum equals, exactly, the sum mod 2^b of the contributors' quantised inputs
// taken before masking, with two clients dropping after sharing keys (their pairwise masks
// rebuilt from their mask keys), one dropping before unmasking, and two inputs arriving inside
// an aggregator's partial sum. Below 32 bits the inputs travel packed at b bits per element,
// and a masked input is still uniform over the ring.
TEST(ProtocolTest, QuantisedSumIsExactUnderMasksAtEveryBitWidth) {
  const uint32_t n = 10;
  const uint64_t length = 1001;
  for (uint32_t bits : {32u, 16u, 12u, 8u}) {
    SCOPED_TRACE(bits);
    auto p = Params(n, length);
    if (bits != 32) p.set_bits_per_element(bits);
    Handheld h(p, static_cast<uint8_t>(bits));
    const auto updates = Updates(n, length, 40 + bits);
    std::vector<uint32_t> expected(length, 0);
    MaskedPartialSum shard(p.round_id(), length, bits);
    for (uint32_t i = 0; i < n; ++i) {
      if (i == 2 || i == 7) continue;  // drop after sharing keys
      std::vector<uint32_t> quantized;
      ASSERT_OK_AND_ASSIGN(SecAggMaskedInput masked,
                           h.clients[i].MaskInput(h.routed[i], updates[i], 1.0, &quantized));
      if (bits == 32) {
        EXPECT_EQ(masked.masked_size(), static_cast<int>(length));
        EXPECT_TRUE(masked.packed_masked().empty());
      } else {
        EXPECT_EQ(masked.masked_size(), 0);
        EXPECT_EQ(masked.packed_masked().size(), PackedBytes(length, bits));
      }
      ASSERT_EQ(quantized.size(), length);
      for (uint64_t e = 0; e < length; ++e) expected[e] += quantized[e];
      if (i == 3) {  // what the server receives is uniform over Z_2^b (top 4 of the b bits)
        std::vector<uint32_t> wire(masked.masked().begin(), masked.masked().end());
        if (bits != 32) {
          wire.resize(length);
          ASSERT_THAT(UnpackBits(masked.packed_masked(), bits, absl::MakeSpan(wire)), IsOk());
          for (uint32_t& v : wire) v <<= 32 - bits;
        }
        EXPECT_LT(TopNibbleChiSquare(wire), 45.0);
      }
      if (i < 2) {
        ASSERT_THAT(shard.Add(masked), IsOk());
      } else {
        ASSERT_THAT(h.server.AddMaskedInput(masked), IsOk());
      }
    }
    ASSERT_THAT(h.server.AddMaskedPartialSum(shard.Take()), IsOk());
    ReduceToBits(absl::MakeSpan(expected), bits);
    ASSERT_OK_AND_ASSIGN(auto requests, h.server.RequestUnmasking());
    for (const auto& r : requests) {
      if (r.recipient() == 4) continue;  // drops before unmasking: its input stays in
      ASSERT_OK_AND_ASSIGN(auto response, h.clients[r.recipient()].Unmask(r));
      ASSERT_THAT(h.server.AddUnmaskResponse(response), IsOk());
    }
    ASSERT_OK_AND_ASSIGN(UnmaskedSum sum, h.server.CloseUnmasking());
    EXPECT_EQ(sum.contributors, (std::vector<uint32_t>{0, 1, 3, 4, 5, 6, 8, 9}));
    EXPECT_EQ(sum.dropped_after_sharing, (std::vector<uint32_t>{2, 7}));
    EXPECT_EQ(sum.bits, bits);
    ASSERT_EQ(sum.ring_sum, expected);
    ASSERT_OK_AND_ASSIGN(double scale, ChooseScale(n, p.clip_norm(), bits));
    EXPECT_EQ(sum.sum, Dequantize(expected, scale, bits));
    EXPECT_EQ(sum.error_bound, ErrorBound(n, p.clip_norm(), bits));
    for (uint64_t e = 0; e < length; ++e) {
      double truth = 0;
      for (uint32_t i : sum.contributors) truth += updates[i][e];
      ASSERT_NEAR(sum.sum[e], truth, sum.error_bound) << e;
    }
  }
}

// The wire form must match the round's width: fixed32 elements at 32 bits, packed_masked of
// exactly ceil(length x b / 8) bytes below; a cohort too large for its bits is refused up front.
TEST(ProtocolTest, MaskedInputsOfTheWrongWidthAreRefused) {
  const uint64_t length = 5;
  auto p16 = Params(4, length);
  p16.set_bits_per_element(16);
  Handheld h16(p16);
  ASSERT_OK_AND_ASSIGN(SecAggMaskedInput good,
                       h16.clients[0].MaskInput(h16.routed[0], std::vector<float>(5, 0.1f), 1.0));
  SecAggMaskedInput as_fixed32 = good;
  as_fixed32.clear_packed_masked();
  for (int e = 0; e < 5; ++e) as_fixed32.add_masked(0);
  EXPECT_THAT(h16.server.AddMaskedInput(as_fixed32),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("packed at 16 bits")));
  SecAggMaskedInput short_packed = good;
  short_packed.mutable_packed_masked()->pop_back();
  EXPECT_THAT(h16.server.AddMaskedInput(short_packed),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("10 bytes of packed_masked")));
  EXPECT_THAT(h16.server.AddMaskedInput(good), IsOk());

  Handheld h32(Params(4, length));
  ASSERT_OK_AND_ASSIGN(SecAggMaskedInput full,
                       h32.clients[0].MaskInput(h32.routed[0], std::vector<float>(5, 0.1f), 1.0));
  full.set_packed_masked(std::string(10, '\0'));
  EXPECT_THAT(h32.server.AddMaskedInput(full),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("runs at 32 bits")));

  auto p8 = Params(20, length);
  p8.set_bits_per_element(8);
  EXPECT_THAT(ResolveParams(p8),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("20 clients"), HasSubstr("ring of 8 bits"))));
  for (uint32_t bad : {1u, 7u, 33u}) {
    p8.set_bits_per_element(bad);
    EXPECT_THAT(ResolveParams(p8),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bits_per_element")));
  }
}

TEST(ProtocolTest, StepsOutOfOrderAreRefused) {
  const auto p = Params(4, 4);
  ASSERT_OK_AND_ASSIGN(SecAggClient client, SecAggClient::Create(p, 0, Bytes32{}, Identity(0)));
  const std::vector<float> update(4, 0.0f);
  EXPECT_THAT(client.MaskInput(SecAggRoutedShares(), update, 1.0),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("out of order")));
  ASSERT_OK_AND_ASSIGN(SecAggServer server, SecAggServer::Create(p));
  EXPECT_THAT(server.RequestUnmasking(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("out of order")));
}

TEST(ProtocolTest, ParamsAreValidated) {
  auto p = Params(10, 4);
  p.set_threshold(1);
  EXPECT_THAT(ResolveParams(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("threshold 1")));
  p = Params(10, 4);
  p.set_graph_seed("short");
  EXPECT_THAT(ResolveParams(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("graph_seed")));
  p = Params(10, 0);
  EXPECT_THAT(ResolveParams(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("vector_length")));
  p = Params(10, 4, 7, 0, -1.0);
  EXPECT_THAT(ResolveParams(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("clip_norm")));
  EXPECT_THAT(SecAggClient::Create(Params(10, 4), 10, Bytes32{}, Identity(10)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("index 10")));
}

}  // namespace
}  // namespace fedsched::secagg

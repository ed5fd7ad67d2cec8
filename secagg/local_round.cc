#include "secagg/local_round.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "secagg/client.h"

namespace fedsched::secagg {
namespace {

using fedsched::v1::SecAggRoundParams;

// Runs `f` as the server's computation.
template <typename F>
auto AsServer(LocalRoundObserver& observer, F f) {
  observer.Enter(-1);
  auto out = f();
  observer.Leave(-1);
  return out;
}

// Runs one step over the live clients, in index order as if their messages arrived so:
// `run(i, client)` returns the client's message and `deliver(message)` hands it to the server
// at once (nothing is collected, so no masked input outlives its fold). A client whose own step
// or whose message fails is dropped, the error noted.
template <typename Run, typename Deliver>
void ClientStep(std::vector<std::optional<SecAggClient>>& clients,
                absl::Span<const DropPoint> drops, DropPoint before, LocalRoundObserver& observer,
                LocalRoundResult& result, int step, Run run, Deliver deliver) {
  for (uint32_t i = 0; i < clients.size(); ++i) {
    if (!clients[i].has_value()) continue;
    if (drops[i] == before) {
      clients[i].reset();
      continue;
    }
    observer.Enter(static_cast<int>(i));
    auto message = run(i, *clients[i]);
    observer.Leave(static_cast<int>(i));
    absl::Status status = message.status();
    if (status.ok()) {
      result.bytes.to_server[step] += message->ByteSizeLong();
      status = AsServer(observer, [&] { return deliver(*message); });
    }
    if (!status.ok()) {
      result.client_errors.emplace_back(i, status);
      clients[i].reset();
    }
  }
}

// The server's messages of a step, by recipient, with their bytes counted.
template <typename Message>
std::vector<std::optional<Message>> ByRecipient(std::vector<Message> messages, uint32_t n,
                                                LocalRoundResult& result, int step) {
  std::vector<std::optional<Message>> out(n);
  for (Message& m : messages) {
    result.bytes.to_clients[step] += m.ByteSizeLong();
    const uint32_t r = m.recipient();
    out[r] = std::move(m);
  }
  return out;
}

absl::Status Missing(uint32_t i) {
  return absl::FailedPreconditionError(absl::StrCat("client ", i, " got no server message"));
}

}  // namespace

uint64_t LocalRoundBytes::Total() const {
  uint64_t total = 0;
  for (int s = 0; s < 4; ++s) total += to_server[s] + to_clients[s];
  return total;
}

LocalRoundResult RunLocalRound(const SecAggRoundParams& params,
                               absl::Span<const absl::Span<const float>> updates,
                               absl::Span<const double> weights, absl::Span<const DropPoint> drops,
                               const Bytes32& entropy, LocalRoundObserver* observer) {
  LocalRoundObserver quiet;
  LocalRoundObserver& obs = observer != nullptr ? *observer : quiet;
  LocalRoundResult result;
  const uint32_t n = params.cohort_size();
  if (updates.size() != n || weights.size() != n || drops.size() != n) {
    result.sum = absl::InvalidArgumentError(
        "local round: updates, weights and drops need cohort_size entries each");
    return result;
  }
  absl::StatusOr<SecAggServer> server = AsServer(obs, [&] { return SecAggServer::Create(params); });
  if (!server.ok()) {
    result.sum = server.status();
    return result;
  }
  Drbg rng(entropy);
  std::vector<std::optional<SecAggClient>> clients(n);
  for (uint32_t i = 0; i < n; ++i) {
    const Bytes32 client_entropy = rng.Next32();
    // A device's signing key is long-term, made once per install, not per round: outside the
    // client's timed part. Seeded from the client's entropy so that runs repeat.
    absl::StatusOr<SigningKey> key = SigningKey::FromSeed(
        Sha256Of(absl::StrCat("local round signing key ", ToString(client_entropy))));
    if (!key.ok()) {
      result.sum = key.status();
      return result;
    }
    obs.Enter(static_cast<int>(i));
    absl::StatusOr<SecAggClient> client = SecAggClient::Create(
        params, i, client_entropy, MemberIdentity{absl::StrCat("local-", i), *std::move(key)});
    obs.Leave(static_cast<int>(i));
    if (!client.ok()) {
      result.sum = client.status();
      return result;
    }
    clients[i].emplace(*std::move(client));
  }
  ClientStep(
      clients, drops, DropPoint::kBeforeAdvertise, obs, result, 0,
      [](uint32_t, SecAggClient& c) { return c.Advertise(); },
      [&](const fedsched::v1::SecAggAdvertise& m) {
        return server->AddAdvertisement(m, m.signing_public_key());
      });
  auto directories = AsServer(obs, [&] { return server->CloseAdvertisements(); });
  if (!directories.ok()) {
    result.sum = directories.status();
    return result;
  }
  auto to_share = ByRecipient(*std::move(directories), n, result, 0);
  ClientStep(
      clients, drops, DropPoint::kBeforeShareKeys, obs, result, 1,
      [&](uint32_t i, SecAggClient& c) -> absl::StatusOr<fedsched::v1::SecAggShareKeys> {
        if (!to_share[i].has_value()) return Missing(i);
        return c.ShareKeys(*to_share[i]);
      },
      [&](const fedsched::v1::SecAggShareKeys& m) { return server->AddShareKeys(m); });
  auto routed_or = AsServer(obs, [&] { return server->CloseShareKeys(); });
  if (!routed_or.ok()) {
    result.sum = routed_or.status();
    return result;
  }
  auto routed = ByRecipient(*std::move(routed_or), n, result, 1);
  ClientStep(
      clients, drops, DropPoint::kBeforeMaskedInput, obs, result, 2,
      [&](uint32_t i, SecAggClient& c) -> absl::StatusOr<fedsched::v1::SecAggMaskedInput> {
        if (!routed[i].has_value()) return Missing(i);
        return c.MaskInput(*routed[i], updates[i], weights[i]);
      },
      [&](const fedsched::v1::SecAggMaskedInput& m) { return server->AddMaskedInput(m); });
  auto requests_or = AsServer(obs, [&] { return server->RequestUnmasking(); });
  if (!requests_or.ok()) {
    result.sum = requests_or.status();
    return result;
  }
  auto requests = ByRecipient(*std::move(requests_or), n, result, 2);
  ClientStep(
      clients, drops, DropPoint::kBeforeUnmask, obs, result, 3,
      [&](uint32_t i, SecAggClient& c) -> absl::StatusOr<fedsched::v1::SecAggUnmaskResponse> {
        if (!requests[i].has_value()) return Missing(i);
        return c.Unmask(*requests[i]);
      },
      [&](const fedsched::v1::SecAggUnmaskResponse& m) { return server->AddUnmaskResponse(m); });
  result.sum = AsServer(obs, [&] { return server->CloseUnmasking(); });
  return result;
}

}  // namespace fedsched::secagg

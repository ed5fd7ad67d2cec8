#include "secagg/local_round.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "secagg/client.h"

namespace fedsched::secagg {
namespace {

using fedsched::v1::SecAggRoundParams;

// Runs one step over the live clients: `run(i, client)` returns the client's message or an
// error, after which the client is dropped. Returns the messages in client order.
template <typename Message, typename Run>
std::vector<Message> ClientStep(std::vector<std::optional<SecAggClient>>& clients,
                                absl::Span<const DropPoint> drops, DropPoint before,
                                LocalRoundObserver& observer, LocalRoundResult& result, int step,
                                Run run) {
  std::vector<Message> out;
  for (uint32_t i = 0; i < clients.size(); ++i) {
    if (!clients[i].has_value()) continue;
    if (drops[i] == before) {
      clients[i].reset();
      continue;
    }
    observer.Enter(static_cast<int>(i));
    absl::StatusOr<Message> message = run(i, *clients[i]);
    observer.Leave(static_cast<int>(i));
    if (!message.ok()) {
      result.client_errors.emplace_back(i, message.status());
      clients[i].reset();
      continue;
    }
    result.bytes.to_server[step] += message->ByteSizeLong();
    out.push_back(*std::move(message));
  }
  return out;
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

// Runs `f` as the server's computation.
template <typename F>
auto AsServer(LocalRoundObserver& observer, F f) {
  observer.Enter(-1);
  auto out = f();
  observer.Leave(-1);
  return out;
}

// Step 2: each live client masks its input and the server folds it at once; none is kept.
void MaskedInputStep(std::vector<std::optional<SecAggClient>>& clients,
                     absl::Span<const DropPoint> drops,
                     const std::vector<std::optional<fedsched::v1::SecAggRoutedShares>>& routed,
                     absl::Span<const absl::Span<const float>> updates,
                     absl::Span<const double> weights, SecAggServer& server,
                     LocalRoundObserver& observer, LocalRoundResult& result) {
  for (uint32_t i = 0; i < clients.size(); ++i) {
    if (!clients[i].has_value()) continue;
    if (drops[i] == DropPoint::kBeforeMaskedInput || !routed[i].has_value()) {
      clients[i].reset();
      continue;
    }
    observer.Enter(static_cast<int>(i));
    auto masked = clients[i]->MaskInput(*routed[i], updates[i], weights[i]);
    observer.Leave(static_cast<int>(i));
    if (!masked.ok()) {
      result.client_errors.emplace_back(i, masked.status());
      clients[i].reset();
      continue;
    }
    result.bytes.to_server[2] += masked->ByteSizeLong();
    const absl::Status added = AsServer(observer, [&] { return server.AddMaskedInput(*masked); });
    if (!added.ok()) result.client_errors.emplace_back(i, added);
  }
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
    obs.Enter(static_cast<int>(i));
    absl::StatusOr<SecAggClient> client = SecAggClient::Create(params, i, rng.Next32());
    obs.Leave(static_cast<int>(i));
    if (!client.ok()) {
      result.sum = client.status();
      return result;
    }
    clients[i].emplace(*std::move(client));
  }
  auto adverts = ClientStep<fedsched::v1::SecAggAdvertise>(
      clients, drops, DropPoint::kBeforeAdvertise, obs, result, 0,
      [](uint32_t, SecAggClient& c) { return c.Advertise(); });
  auto directories = AsServer(obs, [&] { return server->CollectAdvertisements(adverts); });
  if (!directories.ok()) {
    result.sum = directories.status();
    return result;
  }
  auto to_share = ByRecipient(*std::move(directories), n, result, 0);
  auto shares = ClientStep<fedsched::v1::SecAggShareKeys>(
      clients, drops, DropPoint::kBeforeShareKeys, obs, result, 1,
      [&](uint32_t i, SecAggClient& c) -> absl::StatusOr<fedsched::v1::SecAggShareKeys> {
        if (!to_share[i].has_value()) return Missing(i);
        return c.ShareKeys(*to_share[i]);
      });
  auto routed = AsServer(obs, [&] { return server->RouteShares(shares); });
  if (!routed.ok()) {
    result.sum = routed.status();
    return result;
  }
  MaskedInputStep(clients, drops, ByRecipient(*std::move(routed), n, result, 1), updates, weights,
                  *server, obs, result);
  auto requests_or = AsServer(obs, [&] { return server->RequestUnmasking(); });
  if (!requests_or.ok()) {
    result.sum = requests_or.status();
    return result;
  }
  auto requests = ByRecipient(*std::move(requests_or), n, result, 2);
  auto responses = ClientStep<fedsched::v1::SecAggUnmaskResponse>(
      clients, drops, DropPoint::kBeforeUnmask, obs, result, 3,
      [&](uint32_t i, SecAggClient& c) -> absl::StatusOr<fedsched::v1::SecAggUnmaskResponse> {
        if (!requests[i].has_value()) return Missing(i);
        return c.Unmask(*requests[i]);
      });
  result.sum = AsServer(obs, [&] { return server->Unmask(responses); });
  return result;
}

}  // namespace fedsched::secagg

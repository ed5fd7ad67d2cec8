#include "server/service/server_config.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/transport.h"
#include "server/aggregation/aggregator.h"

namespace fedsched {
namespace {

// Also refuses NaN and infinities: no field of the server config means anything with them.
absl::Status CheckAtLeast(const char* field, double value, double minimum) {
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("server config: ", field, " must be a finite number, got ", value));
  }
  if (value < minimum) {
    return absl::InvalidArgumentError(
        absl::StrCat("server config: ", field, " must be >= ", minimum, ", got ", value));
  }
  return absl::OkStatus();
}

// listen_address is HOST:PORT with PORT in [0, 65535] (0: the kernel picks one).
absl::Status CheckListenAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(absl::string_view(address).substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server config: listen_address must be HOST:PORT with PORT in [0, 65535], got '", address,
        "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::ServerConfig> ResolveServerConfig(const v1::ServerConfig& config) {
  v1::ServerConfig out = config;
  if (out.listen_address().empty()) out.set_listen_address("127.0.0.1:50051");
  FEDSCHED_RETURN_IF_ERROR(CheckListenAddress(out.listen_address()));
  if (out.store_path().empty()) {
    return absl::InvalidArgumentError("server config: store_path is required");
  }
  if (out.clients_per_round() == 0) out.set_clients_per_round(10);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("clients_per_round", out.clients_per_round(), 1));
  if (out.min_updates() == 0) out.set_min_updates(std::max(1, out.clients_per_round() / 2));
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("min_updates", out.min_updates(), 1));
  if (out.min_updates() > out.clients_per_round()) {
    return absl::InvalidArgumentError(
        absl::StrCat("server config: min_updates (", out.min_updates(), ") > clients_per_round (",
                     out.clients_per_round(), ")"));
  }
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("num_rounds", out.num_rounds(), 0));
  if (out.round_deadline_s() == 0) out.set_round_deadline_s(120);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("round_deadline_s", out.round_deadline_s(), 0.001));
  if (out.round_closing() == v1::ROUND_CLOSING_UNSPECIFIED) {
    out.set_round_closing(v1::ROUND_CLOSING_FIRST_K);
  }
  if (out.min_online_clients() == 0) out.set_min_online_clients(out.min_updates());
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("min_online_clients", out.min_online_clients(), 1));

  v1::TrainingConfig* training = out.mutable_training();
  if (training->local_epochs() == 0 && training->local_steps() == 0) training->set_local_epochs(1);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("training.local_epochs", training->local_epochs(), 0));
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("training.local_steps", training->local_steps(), 0));
  if (training->batch_size() == 0) training->set_batch_size(32);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("training.batch_size", training->batch_size(), 1));
  if (training->learning_rate() == 0) training->set_learning_rate(0.05f);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("training.learning_rate", training->learning_rate(), 1e-9));
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("training.proximal_mu", training->proximal_mu(), 0));

  v1::ModelConfig* model = out.mutable_model();
  if (model->architecture().empty()) model->set_architecture("mlp");
  if (model->hidden_units() == 0) model->set_hidden_units(128);
  if (model->init_seed() == 0) model->set_init_seed(1);

  v1::SelectionConfig* selection = out.mutable_selection();
  if (selection->policy() == v1::SELECTION_POLICY_UNSPECIFIED) {
    selection->set_policy(v1::SELECTION_POLICY_RANDOM);
  }
  if (selection->overcommit() == 0) selection->set_overcommit(1.3);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("selection.overcommit", selection->overcommit(), 1.0));
  if (selection->min_local_steps() == 0) selection->set_min_local_steps(1);

  v1::CacheConfig* cache = out.mutable_cache();
  if (cache->policy() == v1::CACHE_POLICY_UNSPECIFIED) cache->set_policy(v1::CACHE_POLICY_IMPORTANCE);
  if (cache->capacity_fraction() == 0) cache->set_capacity_fraction(0.1);
  if (cache->capacity_fraction() < 0 || cache->capacity_fraction() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server config: cache.capacity_fraction must be in [0, 1], got ",
        cache->capacity_fraction()));
  }
  if (cache->replication_factor() == 0) cache->set_replication_factor(2);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("cache.replication_factor", cache->replication_factor(), 1));

  if (out.heartbeat_interval_ms() == 0) out.set_heartbeat_interval_ms(2000);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("heartbeat_interval_ms", out.heartbeat_interval_ms(), 10));
  if (out.missed_heartbeats() == 0) out.set_missed_heartbeats(3);
  FEDSCHED_RETURN_IF_ERROR(CheckAtLeast("missed_heartbeats", out.missed_heartbeats(), 1));
  if (out.seed() == 0) out.set_seed(1);
  if (out.shutdown_grace_s() == 0) out.set_shutdown_grace_s(10);

  v1::EvalConfig* eval = out.mutable_eval();
  if (eval->test_images_path().empty()) {
    eval->set_test_images_path("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz");
  }
  if (eval->test_labels_path().empty()) {
    eval->set_test_labels_path("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz");
  }
  if (eval->every_n_rounds() == 0) eval->set_every_n_rounds(1);

  // The aggregation block with its defaults filled in (printed with the effective config), and
  // its errors reported here, before anything starts.
  FEDSCHED_ASSIGN_OR_RETURN(*out.mutable_aggregation(),
                            EffectiveAggregationConfig(out.aggregation()));
  // Krum needs K >= 2f + 3 updates (Blanchard et al. 2017): a round that may commit with fewer
  // would fail at every attempt.
  const v1::AggregationConfig& aggregation = out.aggregation();
  if (aggregation.rule() == v1::AGGREGATION_RULE_KRUM ||
      aggregation.rule() == v1::AGGREGATION_RULE_MULTI_KRUM) {
    const int f = aggregation.krum_byzantine() > 0 ? aggregation.krum_byzantine() : 1;
    if (out.min_updates() < 2 * f + 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          "server config: ", v1::AggregationRule_Name(aggregation.rule()), " with krum_byzantine = ",
          f, " needs rounds of at least 2f + 3 = ", 2 * f + 3, " updates, but min_updates is ",
          out.min_updates(), " (clients_per_round ", out.clients_per_round(), ")"));
    }
  }

  FEDSCHED_ASSIGN_OR_RETURN(*out.mutable_transport(), ResolveTransport(out.transport()));
  return out;
}

}  // namespace fedsched

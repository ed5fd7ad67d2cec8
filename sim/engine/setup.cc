// SimConfig resolution (the round settings by round::ResolveRoundConfig, docs/ARCHITECTURE.md
// "The round engine") and the assembly of a simulation.
#include "sim/engine/setup.h"

#include <cmath>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/cache/cache_policy.h"
#include "common/config.h"
#include "common/status_macros.h"
#include "models/cnn.h"
#include "server/planner/policy_registry.h"
#include "server/round/round_config.h"
#include "sim/engine/modelled_learner.h"
#include "sim/engine/training_learner.h"

namespace fedsched::sim {
namespace {

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("sim config: ", field, ": ", what));
}

absl::Status ResolveCurve(v1::SimConfig& c) {
  v1::ModelledCurveConfig* curve = c.mutable_curve();
  if (curve->initial_accuracy() == 0) curve->set_initial_accuracy(0.1);
  if (curve->final_accuracy() == 0) curve->set_final_accuracy(0.85);
  if (curve->initial_loss() == 0) curve->set_initial_loss(2.3);
  if (curve->final_loss() == 0) curve->set_final_loss(0.45);
  if (curve->tau_rounds() == 0) curve->set_tau_rounds(60);
  if (!(curve->tau_rounds() > 0)) return Invalid("curve.tau_rounds", "must be > 0");
  if (c.model_bytes() < 0) return Invalid("model_bytes", "must be >= 0");
  if (c.model_bytes() == 0) c.set_model_bytes(407080);
  if (c.no_train_samples_per_client() < 0) {
    return Invalid("no_train_samples_per_client", "must be > 0");
  }
  if (c.no_train_samples_per_client() == 0) c.set_no_train_samples_per_client(60);
  return absl::OkStatus();
}

// SimConfig.trainer: "reference" by default; "torch" trains the CNN only.
absl::Status ResolveTrainer(v1::SimConfig& c) {
  if (c.trainer().empty()) c.set_trainer(std::string(kReferenceTrainer));
  if (c.trainer() != kReferenceTrainer && c.trainer() != kTorchTrainer) {
    return Invalid("trainer", absl::StrCat("\"", c.trainer(), "\" is unknown; use \"",
                                           kReferenceTrainer, "\" or \"", kTorchTrainer, "\""));
  }
  if (c.trainer() == kTorchTrainer && !c.no_train() &&
      c.server().model().architecture() != kCnnArchitecture) {
    return Invalid("trainer", absl::StrCat("\"torch\" trains the \"cnn\" architecture only; "
                                           "server.model.architecture is \"",
                                           c.server().model().architecture(), "\""));
  }
  return absl::OkStatus();
}

// `field` of the config at `config_path`: relative to the config's directory.
absl::Status ResolvePath(const std::filesystem::path& dir, const std::string& config_path,
                         const std::string& field, std::string* value) {
  if (value->empty()) return absl::OkStatus();
  const std::filesystem::path given(*value);
  const std::string resolved =
      given.is_absolute() ? *value : (dir / given).lexically_normal().string();
  std::error_code ec;
  if (!std::filesystem::exists(resolved, ec)) {
    return absl::NotFoundError(absl::StrCat(
        config_path, ": ", field, " \"", *value, "\"",
        given.is_absolute() ? ""
                            : absl::StrCat(" (relative to the config's directory: ", resolved, ")"),
        ": no such file"));
  }
  *value = resolved;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::SimConfig> LoadSimConfig(const std::string& path) {
  v1::SimConfig config;
  FEDSCHED_RETURN_IF_ERROR(LoadTextConfig(path, &config));
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  v1::TraceConfig* t = config.mutable_traces();
  FEDSCHED_RETURN_IF_ERROR(
      ResolvePath(dir, path, "traces.capacity_path", t->mutable_capacity_path()));
  FEDSCHED_RETURN_IF_ERROR(
      ResolvePath(dir, path, "traces.sample_size_path", t->mutable_sample_size_path()));
  FEDSCHED_RETURN_IF_ERROR(
      ResolvePath(dir, path, "traces.availability_path", t->mutable_availability_path()));
  FEDSCHED_RETURN_IF_ERROR(ResolvePath(dir, path, "traces.availability_windows_path",
                                       t->mutable_availability_windows_path()));
  FEDSCHED_RETURN_IF_ERROR(
      ResolvePath(dir, path, "job_trace_path", config.mutable_job_trace_path()));
  return config;
}

absl::Status ApplySelectionFlags(const std::string& policy, const std::string& cache_policy,
                                 const std::string& fedcase_base, v1::SimConfig* config) {
  v1::ServerConfig* server = config->mutable_server();
  // The policy and the cache it implies, as fedsched-server's --policy sets them.
  if (!policy.empty()) FEDSCHED_RETURN_IF_ERROR(planner::ApplyPolicyFlag(policy, server));
  if (!cache_policy.empty()) {
    // Case-insensitive, as the flag has always been (registered names are lower case).
    const std::string name = absl::AsciiStrToLower(cache_policy);
    absl::StatusOr<std::shared_ptr<const CachePolicy>> p = MakeCachePolicy(name);
    if (!p.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--cache_policy: ", p.status().message()));
    }
    // A built-in keeps the config's enum form (what configs and outputs have always shown).
    if ((*p)->enum_value() != v1::CACHE_POLICY_UNSPECIFIED) {
      server->mutable_cache()->set_policy((*p)->enum_value());
      server->mutable_cache()->clear_policy_name();
    } else {
      server->mutable_cache()->set_policy_name(name);
    }
  }
  if (!fedcase_base.empty()) {
    v1::FedCaseConfig::BasePolicy p;
    if (!v1::FedCaseConfig::BasePolicy_Parse("BASE_POLICY_" + absl::AsciiStrToUpper(fedcase_base),
                                             &p) ||
        p == v1::FedCaseConfig::BASE_POLICY_UNSPECIFIED) {
      return absl::InvalidArgumentError("--fedcase_base must be oort or random");
    }
    server->mutable_selection()->mutable_fedcase()->set_base_policy(p);
  }
  return absl::OkStatus();
}

absl::Status ApplyConfigOverride(const std::string& fragment, v1::SimConfig* config) {
  if (fragment.empty()) return absl::OkStatus();
  v1::SimConfig overlay;
  // Parsed on its own first, so that a bad fragment leaves `config` untouched and the error
  // names --set rather than the config file.
  FEDSCHED_RETURN_IF_ERROR(ParseTextConfig(fragment, "--set", &overlay));
  config->MergeFrom(overlay);
  return absl::OkStatus();
}

absl::Status ApplyForecastFlag(const std::string& forecast, v1::SimConfig* config) {
  if (forecast.empty()) return absl::OkStatus();
  v1::AvailabilityForecast f;
  if (!v1::AvailabilityForecast_Parse("AVAILABILITY_FORECAST_" + absl::AsciiStrToUpper(forecast),
                                      &f) ||
      f == v1::AVAILABILITY_FORECAST_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--availability_forecast must be trace, learned or none, got \"", forecast, "\""));
  }
  config->set_availability_forecast(f);
  return absl::OkStatus();
}

namespace {

// An enum value's proto name without its prefix, lower case (CACHE_POLICY_LRU -> "lru").
std::string LowerEnumName(absl::string_view name, absl::string_view prefix) {
  absl::ConsumePrefix(&name, prefix);
  return absl::AsciiStrToLower(name);
}

}  // namespace

std::string ForecastName(v1::AvailabilityForecast forecast) {
  if (forecast == v1::AVAILABILITY_FORECAST_UNSPECIFIED) forecast = v1::AVAILABILITY_FORECAST_TRACE;
  return LowerEnumName(v1::AvailabilityForecast_Name(forecast), "AVAILABILITY_FORECAST_");
}

std::string CachePolicyName(v1::CachePolicy policy) {
  v1::CacheConfig config;
  config.set_policy(policy);
  return CachePolicyNameOf(config);
}

std::string PolicyName(v1::SelectionPolicy policy) {
  v1::SelectionConfig selection;
  selection.set_policy(policy);
  return planner::SelectionPolicyName(selection);
}

std::string RunName(const v1::SimConfig& config) {
  return absl::StrCat(planner::SelectionPolicyName(config.server().selection()),
                      config.server().aggregation().async_fedbuff() ? "-fedbuff" : "");
}

absl::StatusOr<v1::SimConfig> ResolveSimConfig(const v1::SimConfig& in) {
  v1::SimConfig c = in;
  if (c.num_clients() < 0) return Invalid("num_clients", "must be > 0");
  if (c.num_clients() == 0) c.set_num_clients(1000);
  FEDSCHED_ASSIGN_OR_RETURN(*c.mutable_server(),
                            round::ResolveRoundConfig(c.server(), "sim config: server"));
  if (c.server().clients_per_round() > c.num_clients()) {
    return Invalid("server.clients_per_round",
                   absl::StrCat("must be <= num_clients (", c.num_clients(), "), got ",
                                c.server().clients_per_round()));
  }
  if (!(c.target_accuracy() >= 0 && c.target_accuracy() <= 1)) {
    return Invalid("target_accuracy", "must be in [0, 1]");
  }
  if (!(c.max_virtual_hours() >= 0) || std::isinf(c.max_virtual_hours())) {
    return Invalid("max_virtual_hours", "must be finite and >= 0");
  }
  // With a job trace the jobs stop by their own specs (JobSpec.num_rounds, target_accuracy).
  if (c.server().num_rounds() == 0 && c.target_accuracy() == 0 && c.max_virtual_hours() == 0 &&
      c.job_trace_path().empty()) {
    return Invalid("server.num_rounds",
                   "is 0 (run forever) and neither target_accuracy nor max_virtual_hours is set: "
                   "the simulation would never stop");
  }
  FEDSCHED_RETURN_IF_ERROR(ResolveCurve(c));
  if (c.train_threads() < 0) return Invalid("train_threads", "must be >= 1");
  if (c.train_threads() == 0) c.set_train_threads(2);
  FEDSCHED_RETURN_IF_ERROR(ResolveTrainer(c));
  if (!(c.round_trip_s() >= 0) || std::isinf(c.round_trip_s())) {
    return Invalid("round_trip_s", "must be finite and >= 0");
  }
  if (c.round_trip_s() == 0) c.set_round_trip_s(kDefaultRoundTripS);
  if (!v1::AvailabilityForecast_IsValid(c.availability_forecast())) {
    return Invalid("availability_forecast",
                   absl::StrCat(static_cast<int>(c.availability_forecast()),
                                " is unknown; use AVAILABILITY_FORECAST_TRACE, _LEARNED or _NONE"));
  }
  if (c.availability_forecast() == v1::AVAILABILITY_FORECAST_UNSPECIFIED) {
    c.set_availability_forecast(v1::AVAILABILITY_FORECAST_TRACE);
  }
  if (c.server().selection().learned_availability()) {
    return Invalid("server.selection.learned_availability",
                   "is the live server's (learned from heartbeats, which the simulator does not "
                   "model); use availability_forecast: AVAILABILITY_FORECAST_LEARNED");
  }
  if (c.traces().capacity_path().empty()) return Invalid("traces.capacity_path", "is required");
  if (!(c.traces().start_time_s() >= 0) || std::isinf(c.traces().start_time_s())) {
    return Invalid("traces.start_time_s", "must be finite and >= 0");
  }
  return c;
}

absl::StatusOr<std::unique_ptr<Learner>> MakeLearner(const v1::SimConfig& c,
                                                     const LearnerFactory& make_learner) {
  const v1::ServerConfig& server = c.server();
  if (c.no_train()) {
    ModelledLearner::Options lo;
    lo.curve = c.curve();
    lo.num_clients = c.num_clients();
    lo.clients_per_round = server.clients_per_round();
    lo.samples_per_client = c.no_train_samples_per_client();
    lo.batch_size = server.training().batch_size();
    lo.model_bytes = c.model_bytes();
    FEDSCHED_ASSIGN_OR_RETURN(lo.cache_policy, MakeCachePolicy(server.cache()));
    lo.cache_fraction = server.cache().capacity_fraction();
    lo.replication = server.cache().replication_factor();
    lo.seed = server.seed();
    return std::unique_ptr<Learner>(std::make_unique<ModelledLearner>(lo));
  }
  if (make_learner) return make_learner(c);
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<TrainingLearner> learner, TrainingLearner::Create(c));
  return std::unique_ptr<Learner>(std::move(learner));
}

absl::StatusOr<std::unique_ptr<Simulation>> BuildSimulation(const v1::SimConfig& raw,
                                                            const LearnerFactory& make_learner) {
  auto sim = std::make_unique<Simulation>();
  FEDSCHED_ASSIGN_OR_RETURN(sim->config, ResolveSimConfig(raw));
  const v1::SimConfig& c = sim->config;
  sim->run_name = c.run_name().empty() ? RunName(c) : c.run_name();
  FEDSCHED_ASSIGN_OR_RETURN(CapacityTrace capacity, CapacityTrace::LoadFromConfig(c.traces()));
  sim->capacity = std::make_unique<CapacityTrace>(std::move(capacity));
  FEDSCHED_ASSIGN_OR_RETURN(AvailabilityTrace availability,
                            AvailabilityTrace::Load(c.traces(), c.num_clients()));
  sim->availability = std::make_unique<AvailabilityTrace>(std::move(availability));
  FEDSCHED_ASSIGN_OR_RETURN(sim->learner, MakeLearner(c, make_learner));
  SimulatorParts parts;
  parts.config = c;
  parts.capacity = sim->capacity.get();
  parts.availability = sim->availability.get();
  parts.learner = sim->learner.get();
  FEDSCHED_ASSIGN_OR_RETURN(sim->simulator, Simulator::Create(std::move(parts)));
  return sim;
}

}  // namespace fedsched::sim

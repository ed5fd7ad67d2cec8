#include "sim/engine/device_budgets.h"

#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "server/round/checkin_pacer.h"

namespace fedsched::sim {
namespace {

using round::SplitMix64;
using round::UnitDraw;

// Draw streams: which quantity a key is for.
enum Stream : uint64_t { kTier = 1, kFactor = 2, kFraction = 3, kModel = 4, kTask = 5, kStore = 6 };

uint64_t Key(uint64_t seed, Stream stream, uint64_t id) {
  return SplitMix64(SplitMix64(seed * 8 + stream) ^ id);
}

uint64_t HashName(const std::string& name) {
  uint64_t h = 0;
  for (unsigned char ch : name) h = SplitMix64(h ^ ch);
  return h;
}

// A standard normal draw (Box-Muller) from one key.
double Normal(uint64_t key) {
  const double u1 = 1.0 - UnitDraw(key);  // (0, 1]
  const double u2 = UnitDraw(SplitMix64(key));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// A tier's size (GB) drawn by share.
double DrawTier(const google::protobuf::RepeatedPtrField<v1::RamTier>& tiers, uint64_t key) {
  double total = 0;
  for (const v1::RamTier& t : tiers) total += t.share();
  double u = UnitDraw(key) * total;
  for (const v1::RamTier& t : tiers) {
    if (u < t.share()) return t.ram_gb();
    u -= t.share();
  }
  return tiers.empty() ? 0 : tiers[tiers.size() - 1].ram_gb();
}

absl::Status CheckTiers(const google::protobuf::RepeatedPtrField<v1::RamTier>& tiers,
                        const char* field) {
  double total = 0;
  for (const v1::RamTier& t : tiers) {
    if (!(t.ram_gb() > 0) || !(t.share() >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("budgets.", field,
                                                     ": ram_gb must be > 0 and share >= 0, got ",
                                                     t.ram_gb(), " and ", t.share()));
    }
    total += t.share();
  }
  if (!tiers.empty() && !(total > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("budgets.", field, ": every share is 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::DeviceBudgetConfig> ResolveDeviceBudgets(const v1::DeviceBudgetConfig& in) {
  v1::DeviceBudgetConfig c = in;
  if (c.tiers().empty()) {
    // Assumed fleet, shaped after the public figures cited in docs/guides/RESOURCE_FIT.md.
    constexpr double kDefaultTiers[][2] = {{2, 0.15}, {3, 0.15}, {4, 0.30}, {6, 0.25}, {8, 0.15}};
    for (const auto& tier : kDefaultTiers) {
      v1::RamTier* t = c.add_tiers();
      t->set_ram_gb(tier[0]);
      t->set_share(tier[1]);
    }
  }
  if (c.min_fraction() == 0) c.set_min_fraction(0.01);
  if (c.max_fraction() == 0) c.set_max_fraction(0.04);
  if (c.device_models() == 0) c.set_device_models(40);
  if (c.factor_log_mean() == 0) c.set_factor_log_mean(0.2);
  if (c.factor_log_sd() == 0) c.set_factor_log_sd(0.25);
  if (c.task_log_sd() == 0) c.set_task_log_sd(0.03);
  if (c.model_scale() == 0) c.set_model_scale(1);
  if (c.seed() == 0) c.set_seed(11);
  if (c.storage_fraction() == 0) c.set_storage_fraction(0.001);
  if (absl::Status s = CheckTiers(c.tiers(), "tiers"); !s.ok()) return s;
  if (absl::Status s = CheckTiers(c.storage_tiers(), "storage_tiers"); !s.ok()) return s;
  if (!(c.min_fraction() > 0 && c.max_fraction() <= 1 && c.min_fraction() <= c.max_fraction())) {
    return absl::InvalidArgumentError(
        absl::StrCat("budgets: need 0 < min_fraction <= max_fraction <= 1, got ", c.min_fraction(),
                     " and ", c.max_fraction()));
  }
  if (c.device_models() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("budgets.device_models must be >= 1, got ", c.device_models()));
  }
  if (!(c.factor_log_sd() >= 0) || !(c.task_log_sd() >= 0) || !(c.model_scale() > 0) ||
      !(c.storage_fraction() > 0 && c.storage_fraction() <= 1)) {
    return absl::InvalidArgumentError(
        "budgets: factor_log_sd and task_log_sd must be >= 0, model_scale > 0, storage_fraction "
        "in (0, 1]");
  }
  return c;
}

DeviceBudget DeviceBudgets::ForClient(int32_t client, const std::string& trace_model) const {
  DeviceBudget d;
  const uint64_t seed = config_.seed();
  const auto id = static_cast<uint64_t>(client);
  d.device_model =
      !trace_model.empty()
          ? trace_model
          : absl::StrCat("sim-model-",
                         Key(seed, kModel, id) % static_cast<uint64_t>(config_.device_models()));
  if (!config_.enable()) return d;
  const uint64_t model = HashName(d.device_model);
  const double ram_gb = DrawTier(config_.tiers(), Key(seed, kTier, model));
  d.peak_factor = std::exp(config_.factor_log_mean() +
                           config_.factor_log_sd() * Normal(Key(seed, kFactor, model)));
  const double fraction =
      config_.min_fraction() +
      (config_.max_fraction() - config_.min_fraction()) * UnitDraw(Key(seed, kFraction, id));
  d.memory_budget_bytes = static_cast<int64_t>(ram_gb * 1e9 * fraction);
  if (!config_.storage_tiers().empty()) {
    d.storage_budget_bytes =
        static_cast<int64_t>(DrawTier(config_.storage_tiers(), Key(seed, kStore, id)) * 1e9 *
                             config_.storage_fraction());
  }
  return d;
}

int64_t DeviceBudgets::TruePeakBytes(const DeviceBudget& device, const fit::ModelFeatures& model,
                                     int32_t batch, int64_t serial) const {
  const double jitter = std::exp(config_.task_log_sd() *
                                 Normal(Key(config_.seed(), kTask, static_cast<uint64_t>(serial))));
  return static_cast<int64_t>(static_cast<double>(fit::AnalyticPeakBytes(model, batch)) *
                              device.peak_factor * jitter);
}

}  // namespace fedsched::sim

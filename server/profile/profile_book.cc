#include "server/profile/profile_book.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace fedsched::profile {
namespace {

// Fixed-point scale of the log sums: integer addition is associative, so priors rebuilt by
// Import() equal the incrementally maintained ones bit for bit.
constexpr double kFixedPointScale = 4294967296.0;  // 2^32

enum ContributionBit : uint8_t {
  kComputeMs = 1,
  kComputeRatio = 2,
  kDownKbps = 4,
  kDownRatio = 8,
  kUpKbps = 16,
  kUpRatio = 32,
};

int64_t ToFixedLog(double x) { return std::llround(std::log(x) * kFixedPointScale); }

int64_t ToMs(double now_s) { return std::llround(now_s * 1000.0); }

bool FiniteNonNegative(double v) { return std::isfinite(v) && v >= 0; }

double Ewma(double old_value, double sample, double alpha) {
  return old_value > 0 ? (1.0 - alpha) * old_value + alpha * sample : sample;
}

absl::Status ValidateDevice(const v1::DeviceProfile& d) {
  if (!FiniteNonNegative(d.compute_ms_per_sample()) ||
      !FiniteNonNegative(d.bandwidth_hint_kbps()) || d.storage_budget_bytes() < 0 ||
      d.num_samples() < 0 || d.sample_bytes() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device profile has a negative or non-finite figure: compute_ms_per_sample=",
                     d.compute_ms_per_sample(), " bandwidth_hint_kbps=", d.bandwidth_hint_kbps(),
                     " storage_budget_bytes=", d.storage_budget_bytes(),
                     " num_samples=", d.num_samples(), " sample_bytes=", d.sample_bytes()));
  }
  return absl::OkStatus();
}

// This abseil build has its own string_view type.
absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status NotFound(ClientIndex index) {
  return absl::NotFoundError(absl::StrCat("unknown client index ", index));
}

}  // namespace

absl::StatusOr<ProfileBookOptions> ProfileBookOptions::FromServerConfig(
    const v1::ServerConfig& config) {
  if (config.heartbeat_interval_ms() < 0 || config.missed_heartbeats() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat_interval_ms and missed_heartbeats must be >= 0, got ",
                     config.heartbeat_interval_ms(), " and ", config.missed_heartbeats()));
  }
  ProfileBookOptions options;
  const double interval_ms =
      config.heartbeat_interval_ms() > 0 ? config.heartbeat_interval_ms() : 2000.0;
  const double missed = config.missed_heartbeats() > 0 ? config.missed_heartbeats() : 3.0;
  options.heartbeat_timeout_s = interval_ms * missed / 1000.0;
  const v1::SecurityConfig& security = config.security();
  if (security.failure_cooldown_s() < 0 || !std::isfinite(security.failure_cooldown_s())) {
    return absl::InvalidArgumentError(
        absl::StrCat("security.failure_cooldown_s must be finite and >= 0, got ",
                     security.failure_cooldown_s()));
  }
  if (security.failure_cooldown_after() != 0) {
    options.failure_cooldown_after = std::max(0, security.failure_cooldown_after());
  }
  if (security.failure_cooldown_s() > 0) {
    options.failure_cooldown_s = security.failure_cooldown_s();
  }
  options.reserve_clients = std::max<int64_t>(0, security.max_identities());
  return options;
}

void ProfileBook::LogMean::Add(int64_t fx) {
  ++n;
  sum_fx += fx;
  geo_mean = std::exp(static_cast<double>(sum_fx) / kFixedPointScale / static_cast<double>(n));
}

void ProfileBook::LogMean::Remove(int64_t fx) {
  --n;
  sum_fx -= fx;
  geo_mean = n > 0
                 ? std::exp(static_cast<double>(sum_fx) / kFixedPointScale / static_cast<double>(n))
                 : 0.0;
}

absl::StatusOr<std::unique_ptr<ProfileBook>> ProfileBook::Create(
    const ProfileBookOptions& options) {
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  if (!positive(options.heartbeat_timeout_s)) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat_timeout_s must be > 0, got ", options.heartbeat_timeout_s));
  }
  if (!(options.ewma_alpha > 0 && options.ewma_alpha <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ewma_alpha must be in (0, 1], got ", options.ewma_alpha));
  }
  if (!(options.availability_alpha > 0 && options.availability_alpha <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("availability_alpha must be in (0, 1], got ", options.availability_alpha));
  }
  if (!positive(options.default_compute_ms_per_sample)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "default_compute_ms_per_sample must be > 0, got ", options.default_compute_ms_per_sample));
  }
  if (options.reserve_clients < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("reserve_clients must be >= 0, got ", options.reserve_clients));
  }
  if (!positive(options.default_kbps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("default_kbps must be > 0, got ", options.default_kbps));
  }
  return std::unique_ptr<ProfileBook>(new ProfileBook(options));
}

ProfileBook::ProfileBook(const ProfileBookOptions& options) : options_(options) {
  const auto room = static_cast<size_t>(
      std::clamp<int64_t>(options.reserve_clients, 0, ProfileBookOptions::kMaxReservedClients));
  if (room == 0) return;
  profiles_.reserve(room);
  states_.reserve(room);
  contributions_.reserve(room);
  dirty_flag_.reserve(room);
}

uint32_t ProfileBook::InternDeviceModel(const std::string& model) {
  auto [it, inserted] =
      device_model_ids_.try_emplace(model, static_cast<uint32_t>(model_priors_.size()));
  if (inserted) {
    model_priors_.emplace_back();
    device_model_names_.push_back(model);
  }
  return it->second;
}

void ProfileBook::ApplyContribution(const Contribution& c, uint32_t model, int sign) {
  if (c.mask == 0) return;
  auto apply = [sign](LogMean& m, int64_t fx) { sign > 0 ? m.Add(fx) : m.Remove(fx); };
  for (Prior* p : {&model_priors_[model], &global_prior_}) {
    if (c.mask & kComputeMs) apply(p->compute_ms, c.compute_ms);
    if (c.mask & kComputeRatio) apply(p->compute_ratio, c.compute_ratio);
    if (c.mask & kDownKbps) apply(p->down_kbps, c.down_kbps);
    if (c.mask & kDownRatio) apply(p->down_ratio, c.down_ratio);
    if (c.mask & kUpKbps) apply(p->up_kbps, c.up_kbps);
    if (c.mask & kUpRatio) apply(p->up_ratio, c.up_ratio);
  }
}

void ProfileBook::Refresh(ClientIndex index) {
  const v1::ClientProfile& p = profiles_[index];
  ClientState& s = states_[index];
  ApplyContribution(contributions_[index], s.device_model, -1);

  const bool busy = s.busy;
  const double away_until_s = s.away_until_s;
  s = ClientState();
  s.busy = busy;
  s.away_until_s = away_until_s;
  s.compute_ms_per_sample = p.compute_ms_per_sample();
  s.download_kbps = p.download_kbps();
  s.upload_kbps = p.upload_kbps();
  s.cache_hit_ratio = p.cache_hit_ratio();
  s.statistical_utility = p.statistical_utility();
  s.has_utility = p.successes() > 0;
  s.first_use = absl::StartsWith(p.cert_fingerprint(), kFirstUseBindingPrefix);
  s.measured = p.measured_tasks() > 0;
  s.io_seconds_per_sample = p.last_samples_trained() > 0
                                ? p.last_io_s() / static_cast<double>(p.last_samples_trained())
                                : 0.0;
  s.censored_duration_s = p.censored_duration_s();
  s.consecutive_failures = p.consecutive_failures();
  s.last_failure_s = static_cast<double>(p.last_failure_unix_ms()) / 1000.0;
  s.last_heartbeat_s = static_cast<double>(p.last_heartbeat_unix_ms()) / 1000.0;
  s.benchmark_ms = p.device().compute_ms_per_sample();
  s.bandwidth_hint_kbps = p.device().bandwidth_hint_kbps();
  s.num_samples = p.device().num_samples();
  s.sample_bytes = p.device().sample_bytes();
  s.storage_budget_bytes = p.device().storage_budget_bytes();
  s.memory_budget_bytes = p.device().memory_budget_bytes();
  s.last_selected_round = p.last_selected_round();
  s.device_model = InternDeviceModel(p.device().device_model());

  Contribution c;
  if (s.compute_ms_per_sample > 0) {
    c.mask |= kComputeMs;
    c.compute_ms = ToFixedLog(s.compute_ms_per_sample);
    if (s.benchmark_ms > 0) {
      c.mask |= kComputeRatio;
      c.compute_ratio = ToFixedLog(s.compute_ms_per_sample / s.benchmark_ms);
    }
  }
  if (s.download_kbps > 0) {
    c.mask |= kDownKbps;
    c.down_kbps = ToFixedLog(s.download_kbps);
    if (s.bandwidth_hint_kbps > 0) {
      c.mask |= kDownRatio;
      c.down_ratio = ToFixedLog(s.download_kbps / s.bandwidth_hint_kbps);
    }
  }
  if (s.upload_kbps > 0) {
    c.mask |= kUpKbps;
    c.up_kbps = ToFixedLog(s.upload_kbps);
    if (s.bandwidth_hint_kbps > 0) {
      c.mask |= kUpRatio;
      c.up_ratio = ToFixedLog(s.upload_kbps / s.bandwidth_hint_kbps);
    }
  }
  contributions_[index] = c;
  ApplyContribution(c, s.device_model, +1);
  UpdateWatch(index);
}

void ProfileBook::MarkDirty(ClientIndex index) {
  if (!dirty_flag_[index]) {
    dirty_flag_[index] = 1;
    dirty_.push_back(index);
  }
}

std::string ProfileBook::NextClientId() {
  std::string id;
  do {
    id = absl::StrCat("c", next_client_number_++);
  } while (by_client_id_.contains(id));
  return id;
}

absl::StatusOr<ProfileBook::Registration> ProfileBook::OnRegister(std::string_view identity,
                                                                  const v1::DeviceProfile& device,
                                                                  double now_s,
                                                                  std::string_view client_id) {
  if (identity.empty()) return absl::InvalidArgumentError("empty client identity");
  if (absl::Status s = ValidateDevice(device); !s.ok()) return s;
  if (auto named = by_client_id_.find(AbslView(client_id));
      !client_id.empty() && named != by_client_id_.end() &&
      profiles_[named->second].identity() != identity) {
    return absl::InvalidArgumentError(absl::StrCat("client id '", AbslView(client_id),
                                                   "' names another identity than '",
                                                   AbslView(identity), "'"));
  }
  Registration reg;
  if (auto it = by_identity_.find(AbslView(identity)); it != by_identity_.end()) {
    reg.index = it->second;
    v1::ClientProfile& p = profiles_[reg.index];
    if (!client_id.empty() && p.client_id() != client_id) {
      by_client_id_.erase(p.client_id());
      p.set_client_id(std::string(client_id));
      by_client_id_.emplace(p.client_id(), reg.index);
    }
    *p.mutable_device() = device;
    p.set_last_heartbeat_unix_ms(ToMs(now_s));
    states_[reg.index].busy = false;
    states_[reg.index].away_until_s = 0;  // registering is checking in
  } else {
    if (!free_slots_.empty()) {
      reg.index = free_slots_.back();
      free_slots_.pop_back();
      profiles_[reg.index].Clear();
      states_[reg.index] = ClientState();
      contributions_[reg.index] = Contribution();
    } else {
      if (profiles_.size() >= std::numeric_limits<ClientIndex>::max()) {
        return absl::ResourceExhaustedError("too many clients");
      }
      reg.index = static_cast<ClientIndex>(profiles_.size());
      profiles_.emplace_back();
      states_.emplace_back();
      contributions_.emplace_back();
      dirty_flag_.push_back(0);
    }
    reg.is_new = true;
    v1::ClientProfile& p = profiles_[reg.index];
    p.set_client_id(client_id.empty() ? NextClientId() : std::string(client_id));
    p.set_identity(std::string(identity));
    *p.mutable_device() = device;
    p.set_registered_unix_ms(ToMs(now_s));
    p.set_last_heartbeat_unix_ms(ToMs(now_s));
    p.set_availability(1.0);
    by_client_id_.emplace(p.client_id(), reg.index);
    by_identity_.emplace(p.identity(), reg.index);
  }
  Refresh(reg.index);
  MarkDirty(reg.index);
  return reg;
}

void CopySystemFields(const v1::ClientProfile& from, v1::ClientProfile* to) {
  to->set_compute_ms_per_sample(from.compute_ms_per_sample());
  to->set_upload_kbps(from.upload_kbps());
  to->set_download_kbps(from.download_kbps());
  to->set_availability(from.availability());
  to->set_measured_tasks(from.measured_tasks());
}

absl::Status ProfileBook::AdoptSystemFields(ClientIndex index, const v1::ClientProfile& system) {
  if (index >= profiles_.size() || states_[index].retired) return NotFound(index);
  if (!FiniteNonNegative(system.compute_ms_per_sample()) ||
      !FiniteNonNegative(system.upload_kbps()) || !FiniteNonNegative(system.download_kbps()) ||
      !FiniteNonNegative(system.availability()) || system.availability() > 1 ||
      system.measured_tasks() < 0) {
    return absl::InvalidArgumentError(
        "system profile has a negative or non-finite figure, or an availability above 1");
  }
  CopySystemFields(system, &profiles_[index]);
  // The measured path's bookkeeping: ClientState mirror and the device-model priors.
  Refresh(index);
  MarkDirty(index);
  return absl::OkStatus();
}

absl::Status ProfileBook::OnHeartbeat(ClientIndex index, double now_s) {
  if (index >= profiles_.size() || states_[index].retired) return NotFound(index);
  const int64_t ms = ToMs(now_s);
  profiles_[index].set_last_heartbeat_unix_ms(ms);
  states_[index].last_heartbeat_s = static_cast<double>(ms) / 1000.0;
  return absl::OkStatus();
}

bool ProfileBook::IsOnline(ClientIndex index, double now_s) const {
  const ClientState& s = states_[index];
  return now_s - s.last_heartbeat_s <= options_.heartbeat_timeout_s && now_s >= s.away_until_s;
}

absl::Status ProfileBook::SetAwayUntil(ClientIndex index, double until_s) {
  if (index >= profiles_.size() || states_[index].retired) return NotFound(index);
  if (!(std::isfinite(until_s) && until_s >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("away-until time must be a finite number >= 0, got ", until_s));
  }
  states_[index].away_until_s = until_s;
  return absl::OkStatus();
}

bool ProfileBook::IsAvailable(ClientIndex index, double now_s) const {
  const ClientState& s = states_[index];
  if (s.retired) return false;
  if (IsAway(index, now_s)) return true;
  // Due back at away_until_s: a device a little late (its poll in transit) is still up.
  if (s.away_until_s > 0 && now_s - s.away_until_s <= options_.heartbeat_timeout_s) return true;
  return IsOnline(index, now_s);
}

int64_t ProfileBook::CountAway(double now_s) const {
  int64_t n = 0;
  for (ClientIndex i = 0; i < states_.size(); ++i) n += IsAway(i, now_s) ? 1 : 0;
  return n;
}

int64_t ProfileBook::CountAvailable(double now_s) const {
  int64_t n = 0;
  for (ClientIndex i = 0; i < states_.size(); ++i) n += IsAvailable(i, now_s) ? 1 : 0;
  return n;
}

int64_t ProfileBook::CountAvailableUnproven(double now_s) const {
  int64_t n = 0;
  for (ClientIndex i = 0; i < states_.size(); ++i) {
    n += IsUnproven(i) && IsAvailable(i, now_s) ? 1 : 0;
  }
  return n;
}

namespace {
constexpr uint8_t kWatchFailing = 1;
constexpr uint8_t kWatchUnproven = 2;
}  // namespace

void ProfileBook::UpdateWatch(ClientIndex index) {
  if (watch_.size() < states_.size()) watch_.resize(states_.size(), 0);
  const ClientState& s = states_[index];
  uint8_t now = 0;
  if (!s.retired && s.consecutive_failures > 0) now |= kWatchFailing;
  if (!s.retired && IsUnproven(index)) now |= kWatchUnproven;
  const uint8_t before = watch_[index];
  if (now == before) return;
  if ((now ^ before) & kWatchFailing) {
    if (now & kWatchFailing) {
      failing_.insert(index);
    } else {
      failing_.erase(index);
    }
  }
  if ((now ^ before) & kWatchUnproven) num_unproven_ += (now & kWatchUnproven) ? 1 : -1;
  watch_[index] = now;
}

void ProfileBook::CollectSelectable(double now_s, std::vector<ClientIndex>* out) const {
  out->clear();
  const double oldest = now_s - options_.heartbeat_timeout_s;
  for (ClientIndex i = 0; i < states_.size(); ++i) {
    const ClientState& s = states_[i];
    if (!s.busy && s.last_heartbeat_s >= oldest && now_s >= s.away_until_s) out->push_back(i);
  }
}

int64_t ProfileBook::CountOnline(double now_s) const {
  int64_t n = 0;
  for (ClientIndex i = 0; i < states_.size(); ++i) n += IsOnline(i, now_s) ? 1 : 0;
  return n;
}

void ProfileBook::SampleAvailability(double now_s) {
  const double a = options_.availability_alpha;
  for (ClientIndex i = 0; i < profiles_.size(); ++i) {
    if (states_[i].retired) continue;
    v1::ClientProfile& p = profiles_[i];
    p.set_availability((1.0 - a) * p.availability() + (IsAvailable(i, now_s) ? a : 0.0));
  }
}

absl::Status ProfileBook::OnTaskAssigned(ClientIndex index, int64_t round, double now_s) {
  if (index >= profiles_.size() || states_[index].retired) return NotFound(index);
  if (round < 1) return absl::InvalidArgumentError(absl::StrCat("round must be >= 1, got ", round));
  profiles_[index].set_last_selected_round(round);
  states_[index].last_selected_round = round;
  states_[index].busy = true;
  MarkDirty(index);
  return absl::OkStatus();
}

absl::Status ProfileBook::OnTaskSucceeded(ClientIndex index, const v1::UpdateMetrics& m,
                                          const TaskTiming& timing, double now_s) {
  if (index >= profiles_.size()) return NotFound(index);
  if (m.num_examples() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_examples must be > 0, got ", m.num_examples()));
  }
  if (!FiniteNonNegative(m.train_seconds()) || !FiniteNonNegative(m.download_seconds()) ||
      !FiniteNonNegative(m.io_seconds()) || !FiniteNonNegative(m.statistical_utility()) ||
      m.download_bytes() < 0 || m.cache_hits() < 0 || m.cache_misses() < 0 ||
      !FiniteNonNegative(timing.upload_s) || timing.upload_bytes < 0) {
    return absl::InvalidArgumentError(
        "update metrics have a negative or non-finite seconds, bytes, count or utility figure");
  }
  if (!std::isfinite(timing.completion_s) || !(timing.completion_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("completion_s must be > 0, got ", timing.completion_s));
  }
  const double alpha = options_.ewma_alpha;
  v1::ClientProfile& p = profiles_[index];
  const double examples = static_cast<double>(m.num_examples());
  const double compute_s =
      m.io_seconds() <= m.train_seconds() ? m.train_seconds() - m.io_seconds() : m.train_seconds();
  if (compute_s > 0) {
    p.set_compute_ms_per_sample(
        Ewma(p.compute_ms_per_sample(), compute_s * 1000.0 / examples, alpha));
  }
  if (m.download_seconds() > 0 && m.download_bytes() > 0) {
    const double kbps =
        static_cast<double>(m.download_bytes()) * 8.0 / 1000.0 / m.download_seconds();
    p.set_download_kbps(Ewma(p.download_kbps(), kbps, alpha));
  }
  if (timing.upload_s > 0 && timing.upload_bytes > 0) {
    const double kbps = static_cast<double>(timing.upload_bytes) * 8.0 / 1000.0 / timing.upload_s;
    p.set_upload_kbps(Ewma(p.upload_kbps(), kbps, alpha));
  }
  const int64_t lookups = m.cache_hits() + m.cache_misses();
  if (lookups > 0) {
    const double ratio = static_cast<double>(m.cache_hits()) / static_cast<double>(lookups);
    // The hit ratio may legitimately be 0, so the first measurement is marked by
    // measured_tasks rather than by a non-zero value.
    p.set_cache_hit_ratio(
        p.measured_tasks() > 0 ? (1.0 - alpha) * p.cache_hit_ratio() + alpha * ratio : ratio);
  }
  p.set_statistical_utility(m.statistical_utility());
  p.set_last_duration_s(timing.completion_s);
  p.set_last_io_s(m.io_seconds());
  p.set_last_samples_trained(m.num_examples());
  p.set_successes(p.successes() + 1);
  p.set_measured_tasks(p.measured_tasks() + 1);
  p.set_censored_duration_s(0);
  p.set_consecutive_failures(0);
  const double a = options_.availability_alpha;
  p.set_availability((1.0 - a) * p.availability() + a);
  p.set_last_heartbeat_unix_ms(std::max(p.last_heartbeat_unix_ms(), ToMs(now_s)));
  states_[index].busy = false;
  Refresh(index);
  MarkDirty(index);
  return absl::OkStatus();
}

absl::Status ProfileBook::OnTaskFailed(ClientIndex index, TaskFailure failure, double elapsed_s,
                                       double now_s) {
  if (index >= profiles_.size()) return NotFound(index);
  v1::ClientProfile& p = profiles_[index];
  p.set_failures(p.failures() + 1);
  if (failure == TaskFailure::kDropped) {
    p.set_availability((1.0 - options_.availability_alpha) * p.availability());
  } else if (std::isfinite(elapsed_s) && elapsed_s > 0) {
    p.set_censored_duration_s(std::max(p.censored_duration_s(), elapsed_s));
  }
  if (failure != TaskFailure::kStraggler) {
    p.set_consecutive_failures(p.consecutive_failures() + 1);
    p.set_last_failure_unix_ms(ToMs(now_s));
  }
  states_[index].busy = false;
  Refresh(index);
  MarkDirty(index);
  return absl::OkStatus();
}

bool ProfileBook::InFailureCooldown(ClientIndex index, double now_s) const {
  const ClientState& s = states_[index];
  // A client that never had an update accepted gets no benefit of the doubt: it sits out after
  // its first counted failure (a live sybil that never uploads costs one failed task, not
  // failure_cooldown_after of them; docs/guides/SECURITY.md "Identities and admission").
  const int32_t after = options_.failure_cooldown_after <= 0 ? 0
                        : s.has_utility                      ? options_.failure_cooldown_after
                                                             : 1;
  if (after <= 0 || s.consecutive_failures < after) return false;
  const int64_t doublings = std::min<int64_t>(6, s.consecutive_failures - after);
  const double cooldown_s =
      options_.failure_cooldown_s * static_cast<double>(int64_t{1} << doublings);
  return now_s < s.last_failure_s + cooldown_s;
}

absl::Status ProfileBook::ExcludeFromSecAgg(ClientIndex index, std::string why, double now_s) {
  if (index >= profiles_.size()) return NotFound(index);
  v1::ClientProfile& p = profiles_[index];
  if (!p.secagg_excluded().empty()) return absl::OkStatus();  // the first reason stays
  p.set_secagg_excluded(std::move(why));
  p.set_secagg_excluded_unix_ms(ToMs(now_s));
  MarkDirty(index);
  return absl::OkStatus();
}

bool ProfileBook::SecAggExcluded(ClientIndex index) const {
  return index < profiles_.size() && !profiles_[index].secagg_excluded().empty();
}

absl::Status ProfileBook::SetCertFingerprint(ClientIndex index, std::string fingerprint) {
  if (index >= profiles_.size()) return NotFound(index);
  profiles_[index].set_cert_fingerprint(std::move(fingerprint));
  states_[index].first_use =
      absl::StartsWith(profiles_[index].cert_fingerprint(), kFirstUseBindingPrefix);
  UpdateWatch(index);
  MarkDirty(index);
  return absl::OkStatus();
}

absl::Status ProfileBook::SetSigningPublicKey(ClientIndex index, std::string public_key) {
  if (index >= profiles_.size()) return NotFound(index);
  profiles_[index].set_signing_public_key(std::move(public_key));
  MarkDirty(index);
  return absl::OkStatus();
}

void ProfileBook::CollectUnseen(double now_s, double ttl_s, std::vector<ClientIndex>* out) const {
  out->clear();
  const double oldest = now_s - ttl_s;
  for (ClientIndex i = 0; i < states_.size(); ++i) {
    const ClientState& s = states_[i];
    // A device sent away by pace steering is seen at its appointment, not at its last poll.
    const double seen_s = std::max(s.last_heartbeat_s, s.away_until_s);
    // An identity excluded from secure aggregation is kept, so that its exclusion holds.
    if (!s.retired && !s.busy && !s.has_utility && seen_s < oldest &&
        profiles_[i].secagg_excluded().empty()) {
      out->push_back(i);
    }
  }
}

absl::Status ProfileBook::Retire(ClientIndex index) {
  if (index >= profiles_.size() || states_[index].retired) return NotFound(index);
  if (states_[index].busy) {
    return absl::FailedPreconditionError(absl::StrCat(
        "client ", profiles_[index].client_id(), " has a task in flight and cannot be retired"));
  }
  ApplyContribution(contributions_[index], states_[index].device_model, -1);
  contributions_[index] = Contribution();
  by_client_id_.erase(profiles_[index].client_id());
  by_identity_.erase(profiles_[index].identity());
  profiles_[index].Clear();
  states_[index] = ClientState();
  states_[index].retired = true;
  states_[index].last_heartbeat_s = -std::numeric_limits<double>::infinity();
  UpdateWatch(index);
  if (dirty_flag_[index]) {
    dirty_flag_[index] = 0;
    std::erase(dirty_, index);
  }
  free_slots_.push_back(index);
  return absl::OkStatus();
}

std::optional<ClientIndex> ProfileBook::FindByClientId(std::string_view client_id) const {
  auto it = by_client_id_.find(AbslView(client_id));
  if (it == by_client_id_.end()) return std::nullopt;
  return it->second;
}

std::optional<ClientIndex> ProfileBook::FindByIdentity(std::string_view identity) const {
  auto it = by_identity_.find(AbslView(identity));
  if (it == by_identity_.end()) return std::nullopt;
  return it->second;
}

void ProfileBook::TakeDirty(std::vector<ClientIndex>* out) {
  out->clear();
  out->swap(dirty_);
  for (ClientIndex i : *out) dirty_flag_[i] = 0;
}

absl::Status ProfileBook::Import(absl::Span<const v1::ClientProfile> profiles) {
  if (!profiles_.empty()) {
    return absl::FailedPreconditionError("ProfileBook::Import needs an empty book");
  }
  if (profiles.size() >= std::numeric_limits<ClientIndex>::max()) {
    return absl::ResourceExhaustedError("too many clients");
  }
  absl::flat_hash_map<std::string, ClientIndex> ids, identities;
  int64_t max_number = 0;
  for (size_t i = 0; i < profiles.size(); ++i) {
    const v1::ClientProfile& p = profiles[i];
    if (p.client_id().empty() || p.identity().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("imported profile #", i, " has an empty client id or identity"));
    }
    if (!ids.emplace(p.client_id(), i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("imported profiles repeat client id ", p.client_id()));
    }
    if (!identities.emplace(p.identity(), i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("imported profiles repeat identity ", p.identity()));
    }
    int64_t number = 0;
    if (p.client_id().size() > 1 && p.client_id()[0] == 'c' &&
        absl::SimpleAtoi(absl::string_view(p.client_id()).substr(1), &number)) {
      max_number = std::max(max_number, number);
    }
  }
  profiles_.assign(profiles.begin(), profiles.end());
  states_.assign(profiles_.size(), ClientState());
  contributions_.assign(profiles_.size(), Contribution());
  watch_.assign(profiles_.size(), 0);
  failing_.clear();
  num_unproven_ = 0;
  dirty_flag_.assign(profiles_.size(), 0);
  dirty_.clear();
  by_client_id_ = std::move(ids);
  by_identity_ = std::move(identities);
  next_client_number_ = max_number + 1;
  for (ClientIndex i = 0; i < profiles_.size(); ++i) Refresh(i);
  return absl::OkStatus();
}

}  // namespace fedsched::profile

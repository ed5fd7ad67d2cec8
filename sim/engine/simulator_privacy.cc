// The simulator's side of differential privacy (docs/guides/PRIVACY.md): under distributed DP each
// simulated device clips and noises its update with the SDK's function before it is folded, and
// with utility noise on (selection.utility_noise_factor) it noises its utility report with the
// SDK's function too, so the simulator runs the same code paths as a live run.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/dp_noise.h"
#include "common/status_macros.h"
#include "sim/engine/simulator.h"

namespace fedsched::sim {
namespace {

// Keeps the utility noise's seeds apart from every other stream derived from config.seed.
constexpr uint64_t kUtilityNoiseStream = 0x7574696c6e6f6973ULL;  // "utilnois"

}  // namespace

absl::Status Simulator::PrivatizeUpdate(int64_t serial, round::Update* update,
                                        std::unique_ptr<v1::Model>* noised) const {
  const round::Task* task = engine_->FindTask(update->claim.task_id);
  if (task == nullptr) return absl::OkStatus();
  if (task->utility_noise_stddev > 0) {
    // Seeded (reproducible runs) from the seed, the round and the client: a device's draw does
    // not depend on the order in which others finish.
    const uint64_t seed = round::SplitMix64(
        config_.server().seed() ^
        round::SplitMix64(static_cast<uint64_t>(task->round) ^
                          round::SplitMix64(kUtilityNoiseStream + update->claim.index)));
    FEDSCHED_ASSIGN_OR_RETURN(double utility,
                              NoiseUtilityReport(update->metrics.statistical_utility(),
                                                 task->utility_noise_stddev, seed));
    update->metrics.set_statistical_utility(utility);
  }
  if (task->dp_clip_norm <= 0 || update->delta == nullptr) return absl::OkStatus();
  *noised = std::make_unique<v1::Model>(*update->delta);
  // Seeded (reproducible runs), distinct per task: the seed ^ a multiple of the task serial.
  const uint64_t seed =
      config_.server().seed() ^ (static_cast<uint64_t>(serial) * 0x9E3779B97F4A7C15ULL);
  FEDSCHED_ASSIGN_OR_RETURN(bool unclipped, ClipAndNoiseUpdate(noised->get(), task->dp_clip_norm,
                                                               task->dp_noise_stddev, seed));
  update->delta = noised->get();
  update->metrics.set_dp_unclipped(unclipped);
  return absl::OkStatus();
}

std::string Simulator::BudgetStopReason() const {
  return absl::StrCat("privacy budget spent: epsilon ", last_dp_epsilon_, " after ",
                      engine_->version(), " rounds; one more would exceed target_epsilon ",
                      config_.server().privacy().target_epsilon());
}

}  // namespace fedsched::sim

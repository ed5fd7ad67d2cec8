// The cost of device-to-job matching per server tick (docs/guides/JOBS.md "Scheduling devices
// across jobs"): one DeviceJobMatcher::Match, and one FleetLedger::Rematch (collecting the idle
// devices, their eligible jobs and facts, then matching), over a fleet of `devices` devices and
// `jobs` jobs, for each built-in matcher. Every job asks for devices; each can train about half the
// fleet (five eligibility groups: an architecture and a label); every job described its devices.
//   build/bench/jobs/matcher_bench --benchmark_counters_tabular=true
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "server/jobs/fleet_ledger.h"
#include "server/jobs/matcher.h"

namespace fedsched::jobs {
namespace {

const char* const kMatchers[] = {"fifo", "random", "venn", "fedsched"};
constexpr int kGroups = 5;

std::string ClientId(int i) { return absl::StrCat("client-", 100000 + i); }

// A ledger of `n_devices` devices and `n_jobs` jobs, all asking, all described.
std::unique_ptr<FleetLedger> MakeFleet(std::unique_ptr<DeviceJobMatcher> matcher, int n_devices,
                                       int n_jobs,
                                       std::vector<std::unique_ptr<round::PlanningGate>>* gates) {
  auto ledger =
      std::make_unique<FleetLedger>(FleetOptions{.starvation_bound_s = 600}, std::move(matcher));
  std::mt19937_64 rng(7);
  const std::string archs[] = {"mlp", "cnn"};
  for (int j = 0; j < n_jobs; ++j) {
    FleetJob job;
    job.name = absl::StrCat("job-", j);
    job.model_architecture = archs[j % kGroups % 2];
    job.population.add_required_labels(absl::StrCat("label-", j % kGroups));
    job.sequence = j + 1;
    (void)ledger->AddJob(job);
  }
  for (int i = 0; i < n_devices; ++i) {
    FleetDevice d{ClientId(i), {}, {}, 100};
    d.trainers = {"mlp"};
    if (rng() % 2 == 0) d.trainers.push_back("cnn");
    for (int g = 0; g < kGroups; ++g) {
      if (rng() % 3 != 0) d.labels.push_back(absl::StrCat("label-", g));
    }
    ledger->UpsertDevice(d);
  }
  for (int j = 0; j < n_jobs; ++j) {
    gates->push_back(ledger->Gate(absl::StrCat("job-", j)));
    round::JobFacts facts;
    facts.clients_per_round = 10 + static_cast<int64_t>(rng() % 90);
    facts.deadline_s = (j % 2) * 120.0;
    facts.rounds_remaining = 1 + static_cast<int64_t>(rng() % 200);
    for (int i = 0; i < n_devices; ++i) {
      round::DeviceFacts f;
      f.client_id = ClientId(i);
      f.predicted_round_s = 10 + static_cast<double>(rng() % 190);
      f.utility = static_cast<double>(rng() % 1000) / 100;
      f.availability = static_cast<double>(rng() % 100) / 100;
      f.fits = rng() % 20 != 0;
      facts.devices.push_back(std::move(f));
    }
    const int64_t k = facts.clients_per_round;
    gates->back()->Describe(std::move(facts), 0);
    gates->back()->Settle({}, k * 13 / 10, static_cast<double>(j));
  }
  return ledger;
}

void BM_Rematch(benchmark::State& state) {
  const std::string name = kMatchers[state.range(0)];
  std::vector<std::unique_ptr<round::PlanningGate>> gates;
  auto ledger = MakeFleet(*MakeMatcher(name, 1), static_cast<int>(state.range(1)),
                          static_cast<int>(state.range(2)), &gates);
  double now = 100;
  for (auto _ : state) ledger->Rematch(now += 0.1);
  state.SetLabel(name);
}
BENCHMARK(BM_Rematch)
    ->ArgsProduct({{0, 1, 2, 3}, {10000}, {20}})
    ->ArgNames({"matcher", "devices", "jobs"})
    ->Unit(benchmark::kMillisecond);

// The matcher alone, on the input a Rematch of the same fleet hands it.
class Recorder : public DeviceJobMatcher {
 public:
  explicit Recorder(MatchInput* out) : out_(out) {}
  std::string_view name() const override { return "recorder"; }
  void Match(const MatchInput& input, std::vector<int>* job_of_device) override {
    *out_ = input;
    job_of_device->assign(input.devices.size(), -1);
  }

 private:
  MatchInput* out_;
};

void BM_Match(benchmark::State& state) {
  const std::string name = kMatchers[state.range(0)];
  MatchInput input;
  {
    std::vector<std::unique_ptr<round::PlanningGate>> gates;
    auto ledger = MakeFleet(std::make_unique<Recorder>(&input), static_cast<int>(state.range(1)),
                            static_cast<int>(state.range(2)), &gates);
    ledger->Rematch(100);
    gates.clear();
  }
  auto matcher = MakeMatcher(name, 1);
  std::vector<int> offers;
  for (auto _ : state) (*matcher)->Match(input, &offers);
  state.SetLabel(name);
  state.counters["devices"] = static_cast<double>(input.devices.size());
}
BENCHMARK(BM_Match)
    ->ArgsProduct({{0, 1, 2, 3}, {10000}, {20}})
    ->ArgNames({"matcher", "devices", "jobs"})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fedsched::jobs

BENCHMARK_MAIN();

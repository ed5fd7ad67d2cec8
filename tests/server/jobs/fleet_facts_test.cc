// The fleet ledger's view of what jobs know (Describe), why it offered a device (OfferReason),
// the matcher's richer input, and the waits and starvations it measures (docs/guides/JOBS.md
// "Scheduling devices across jobs").

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/eligibility.h"
#include "server/jobs/fleet_ledger.h"

namespace fedsched::jobs {
namespace {

using ::fedsched::testing::IsOk;
using ::testing::ElementsAre;

FleetDevice Device(std::string id, std::vector<std::string> trainers) {
  return FleetDevice{std::move(id), std::move(trainers), {}, 100};
}

FleetJob Job(std::string name, int64_t sequence, std::string architecture = "mlp") {
  FleetJob job;
  job.name = std::move(name);
  job.model_architecture = std::move(architecture);
  job.sequence = sequence;
  return job;
}

// FIFO matching that keeps a copy of its last input and gives device k the reason "r<k>".
class RecordingMatcher : public DeviceJobMatcher {
 public:
  explicit RecordingMatcher(MatchInput* last) : last_(last) {}
  std::string_view name() const override { return "recording"; }
  void Match(const MatchInput& input, std::vector<int>* job_of_device) override {
    *last_ = input;
    fifo_->Match(input, job_of_device);
  }
  std::string Reason(size_t device) const override { return absl::StrCat("r", device); }

 private:
  MatchInput* const last_;
  std::unique_ptr<DeviceJobMatcher> fifo_ = MakeFifoMatcher();
};

round::DeviceFacts Facts(std::string id, double predicted_s, double utility, bool fits = true) {
  round::DeviceFacts f;
  f.client_id = std::move(id);
  f.predicted_round_s = predicted_s;
  f.utility = utility;
  f.availability = 0.5;
  f.fits = fits;
  return f;
}

TEST(EligibilityGroupTest, JobsWithOneRequirementShareAGroup) {
  FleetJob a = Job("a", 1);
  FleetJob b = Job("b", 2);
  a.population.add_required_labels("cat");
  a.population.add_required_labels("dog");
  b.population.add_required_labels("dog");
  b.population.add_required_labels("cat");
  b.population.add_required_labels("cat");
  EXPECT_EQ(EligibilityGroupOf(a), EligibilityGroupOf(b));
  FleetJob c = Job("c", 3, "cnn");
  EXPECT_NE(EligibilityGroupOf(a), EligibilityGroupOf(c));
  FleetJob d = Job("d", 4);
  d.population.set_min_examples(10);
  EXPECT_NE(EligibilityGroupOf(Job("e", 5)), EligibilityGroupOf(d));
  FleetJob config = Job("cfg", 6);
  config.config_job = true;
  EXPECT_NE(EligibilityGroupOf(Job("e", 5)), EligibilityGroupOf(config));
  // Without an architecture, a job is trained only by devices that name it.
  EXPECT_NE(EligibilityGroupOf(Job("x", 7, "")), EligibilityGroupOf(Job("y", 8, "")));
}

TEST(FleetFactsTest, TheMatcherSeesGroupsFactsAndOptions) {
  MatchInput last;
  FleetLedger ledger(FleetOptions{.starvation_bound_s = 30, .speed_tiers = 0},
                     std::make_unique<RecordingMatcher>(&last));
  ASSERT_THAT(ledger.AddJob(Job("a", 1)), IsOk());
  ASSERT_THAT(ledger.AddJob(Job("b", 2, "cnn")), IsOk());
  for (int i = 0; i < 3; ++i) ledger.UpsertDevice(Device(absl::StrCat("d", i), {"mlp", "cnn"}));
  auto a = ledger.Gate("a");
  auto b = ledger.Gate("b");
  a->Settle({}, 2, 5);
  b->Settle({}, 1, 6);
  round::JobFacts facts;
  facts.clients_per_round = 2;
  facts.deadline_s = 60;
  facts.rounds_committed = 3;
  facts.rounds_remaining = 7;
  facts.accuracy = 0.4;
  facts.target_accuracy = 0.8;
  facts.devices = {Facts("d0", 12, 3), Facts("d1", 0, 0, /*fits=*/false), Facts("d2", 40, 1)};
  a->Describe(facts, 6);
  ledger.Rematch(10);

  EXPECT_EQ(last.starvation_bound_s, 30);
  EXPECT_EQ(last.speed_tiers, 2);  // 0 = 2
  ASSERT_EQ(last.jobs.size(), 2u);
  const MatchJob& ja = last.jobs[0];
  EXPECT_EQ(ja.name, "a");
  EXPECT_EQ(ja.group, EligibilityGroupOf(Job("a", 1)));
  EXPECT_NE(ja.group, last.jobs[1].group);
  EXPECT_EQ(ja.clients_per_round, 2);
  EXPECT_EQ(ja.deadline_s, 60);
  EXPECT_EQ(ja.rounds_committed, 3);
  EXPECT_EQ(ja.rounds_remaining, 7);
  EXPECT_EQ(ja.accuracy, 0.4);
  EXPECT_EQ(ja.target_accuracy, 0.8);
  EXPECT_EQ(ja.asking_since_s, 5);
  EXPECT_EQ(last.jobs[1].asking_since_s, 6);
  EXPECT_EQ(last.jobs[1].rounds_remaining, -1);  // b never described itself

  // d1 does not fit a's model: only b is eligible. Facts are aligned with `eligible`.
  ASSERT_EQ(last.devices.size(), 3u);
  EXPECT_THAT(last.devices[0].eligible, ElementsAre(0, 1));
  ASSERT_EQ(last.devices[0].facts.size(), 2u);
  EXPECT_EQ(last.devices[0].facts[0].predicted_round_s, 12);
  EXPECT_EQ(last.devices[0].facts[0].utility, 3);
  EXPECT_EQ(last.devices[0].facts[0].availability, 0.5);
  EXPECT_EQ(last.devices[0].facts[1].predicted_round_s, 0);  // b: defaults
  EXPECT_EQ(last.devices[0].facts[1].availability, 1);
  EXPECT_THAT(last.devices[1].eligible, ElementsAre(1));
  EXPECT_EQ(last.devices[1].facts.size(), 1u);
}

TEST(FleetFactsTest, AJobNeverPlansADeviceItsModelCannotFit) {
  FleetLedger ledger(FleetOptions{}, nullptr);
  ASSERT_THAT(ledger.AddJob(Job("only", 1)), IsOk());
  ledger.UpsertDevice(Device("small", {"only"}));
  ledger.UpsertDevice(Device("big", {"only"}));
  auto gate = ledger.Gate("only");
  round::JobFacts facts;
  facts.devices = {Facts("big", 10, 1), Facts("small", 10, 1, /*fits=*/false)};
  gate->Describe(facts, 0);
  gate->Settle({}, 2, 0);
  ledger.Rematch(1);
  EXPECT_TRUE(gate->MayPlan("big", 1));
  EXPECT_FALSE(gate->MayPlan("small", 1));  // not even as the only job that can train it
  EXPECT_EQ(ledger.Snapshot()[0].offered, 1);
}

TEST(FleetFactsTest, OfferReasonsComeFromTheMatcherOrTheOnlyJob) {
  MatchInput last;
  FleetLedger ledger(FleetOptions{}, std::make_unique<RecordingMatcher>(&last));
  ASSERT_THAT(ledger.AddJob(Job("a", 1)), IsOk());
  ASSERT_THAT(ledger.AddJob(Job("b", 2, "cnn")), IsOk());
  ledger.UpsertDevice(Device("both", {"mlp", "cnn"}));
  ledger.UpsertDevice(Device("only_b", {"cnn"}));
  auto a = ledger.Gate("a");
  auto b = ledger.Gate("b");
  a->Settle({}, 1, 0);
  ledger.Rematch(1);
  // Device 0 ("both") went to a by the matcher; "only_b" to b as the one job that can use it.
  EXPECT_EQ(a->OfferReason("both"), "r0");
  EXPECT_EQ(b->OfferReason("both"), "");
  EXPECT_EQ(b->OfferReason("only_b"), kOnlyJobEligible);
  EXPECT_EQ(a->OfferReason("unknown"), "");
  // A device registered after the Rematch that only b can train: planned without an offer.
  ledger.UpsertDevice(Device("late", {"cnn"}));
  EXPECT_TRUE(b->MayPlan("late", 2));
  EXPECT_EQ(b->OfferReason("late"), kOnlyJobEligible);
}

FleetJobView ViewOf(const FleetLedger& ledger, const std::string& job) {
  for (const FleetJobView& v : ledger.Snapshot()) {
    if (v.name == job) return v;
  }
  return {};
}

TEST(FleetFactsTest, WaitsRunFromTheFirstAskToThePlannedRound) {
  FleetLedger ledger(FleetOptions{}, nullptr);
  ASSERT_THAT(ledger.AddJob(Job("a", 1)), IsOk());
  auto a = ledger.Gate("a");
  ledger.Rematch(0);
  EXPECT_EQ(ViewOf(ledger, "a").waiting_s, 0);
  a->Settle({}, 3, 10);
  a->Settle({}, 2, 12);  // still asking: the wait goes on from 10
  ledger.Rematch(25);
  EXPECT_EQ(ViewOf(ledger, "a").waiting_s, 15);
  EXPECT_EQ(ViewOf(ledger, "a").max_wait_s, 15);
  a->Settle({}, 0, 30);
  EXPECT_EQ(ViewOf(ledger, "a").waiting_s, 0);
  EXPECT_EQ(ViewOf(ledger, "a").max_wait_s, 20);
  a->Settle({}, 1, 40);
  ledger.Rematch(45);
  EXPECT_EQ(ViewOf(ledger, "a").waiting_s, 5);
  EXPECT_EQ(ViewOf(ledger, "a").max_wait_s, 20);
}

TEST(FleetFactsTest, AStarvationIsAWaitPastTheBoundWhileAUsableDeviceWentToANewerWait) {
  FleetLedger ledger(FleetOptions{.starvation_bound_s = 10}, MakeFifoMatcher());
  ASSERT_THAT(ledger.AddJob(Job("a", 1)), IsOk());
  ASSERT_THAT(ledger.AddJob(Job("b", 2)), IsOk());
  ledger.UpsertDevice(Device("d0", {"mlp"}));
  auto a = ledger.Gate("a");
  auto b = ledger.Gate("b");
  a->Settle({}, 1, 0);
  b->Settle({}, 1, 0);
  ledger.Rematch(5);  // FIFO gives d0 to a; b waits, within the bound
  EXPECT_EQ(ViewOf(ledger, "b").starved, 0);
  ledger.Rematch(10);
  EXPECT_EQ(ViewOf(ledger, "b").starved, 1);
  EXPECT_EQ(ViewOf(ledger, "a").starved, 0);  // it was offered what it could use
  ledger.Rematch(20);
  EXPECT_EQ(ViewOf(ledger, "b").starved, 1);  // once per wait
  b->Settle({}, 0, 21);
  b->Settle({}, 1, 22);
  a->Settle({}, 0, 21);
  a->Settle({}, 1, 23);  // a's new wait begins after b's
  ledger.Rematch(31);
  EXPECT_EQ(ViewOf(ledger, "b").starved, 1);  // 9 s into its new wait
  ledger.Rematch(32);
  EXPECT_EQ(ViewOf(ledger, "b").starved, 2);  // passed over for a, which waited less
  // Without a bound nothing counts.
  FleetLedger unbounded(FleetOptions{}, MakeFifoMatcher());
  ASSERT_THAT(unbounded.AddJob(Job("a", 1)), IsOk());
  ASSERT_THAT(unbounded.AddJob(Job("b", 2)), IsOk());
  unbounded.UpsertDevice(Device("d0", {"mlp"}));
  unbounded.Gate("a")->Settle({}, 1, 0);
  unbounded.Gate("b")->Settle({}, 1, 0);
  unbounded.Rematch(100);
  EXPECT_EQ(ViewOf(unbounded, "b").starved, 0);
  EXPECT_EQ(ViewOf(unbounded, "b").waiting_s, 100);
}

}  // namespace
}  // namespace fedsched::jobs

#include "server/jobs/fleet_ledger.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::jobs {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

FleetDevice Device(std::string id, std::vector<std::string> trainers,
                   std::vector<std::string> labels = {}, int64_t samples = 100) {
  return FleetDevice{std::move(id), std::move(trainers), std::move(labels), samples};
}

FleetJob Job(std::string name, int64_t sequence, std::string architecture = "mlp",
             int32_t priority = 0) {
  FleetJob job;
  job.name = std::move(name);
  job.model_architecture = std::move(architecture);
  job.sequence = sequence;
  job.priority = priority;
  return job;
}

// A ledger with jobs "a" (first) and "b", and devices d0..d<n-1> that train both.
class TwoJobs : public ::testing::Test {
 protected:
  void Make(FleetOptions options, int devices = 4) {
    a_.reset();  // gates before their ledger
    b_.reset();
    ledger_ = std::make_unique<FleetLedger>(options, MakeFifoMatcher());
    ASSERT_THAT(ledger_->AddJob(Job("a", 1)), IsOk());
    ASSERT_THAT(ledger_->AddJob(Job("b", 2)), IsOk());
    for (int i = 0; i < devices; ++i) {
      ledger_->UpsertDevice(Device(absl::StrCat("d", i), {"a", "b"}));
    }
    a_ = ledger_->Gate("a");
    b_ = ledger_->Gate("b");
  }
  // The devices `gate` may plan now, among d0..d<n-1>.
  std::vector<std::string> Plannable(round::PlanningGate& gate, int devices = 4, double now = 0) {
    std::vector<std::string> out;
    for (int i = 0; i < devices; ++i) {
      const std::string id = absl::StrCat("d", i);
      if (gate.MayPlan(id, now)) out.push_back(id);
    }
    return out;
  }
  int64_t Offered(const std::string& job) const {
    for (const FleetJobView& v : ledger_->Snapshot()) {
      if (v.name == job) return v.offered;
    }
    return -1;
  }

  std::unique_ptr<FleetLedger> ledger_;
  std::unique_ptr<round::PlanningGate> a_;
  std::unique_ptr<round::PlanningGate> b_;
};

TEST(FleetLedgerTest, ViewsOfASpecAndARegistration) {
  v1::JobSpec spec;
  spec.set_name("kbd");
  spec.set_priority(3);
  spec.mutable_model()->set_architecture("softmax");
  spec.mutable_population()->add_required_labels("lang:en");
  const FleetJob job = FleetJobOf(spec, 7, 12.5, false);
  EXPECT_EQ(job.name, "kbd");
  EXPECT_EQ(job.model_architecture, "softmax");
  EXPECT_EQ(job.priority, 3);
  EXPECT_EQ(job.sequence, 7);
  EXPECT_EQ(job.submitted_s, 12.5);
  EXPECT_FALSE(job.config_job);
  EXPECT_THAT(job.population.required_labels(), ElementsAre("lang:en"));
  v1::RegisterRequest request;
  request.add_trainers("kbd");
  request.add_labels("lang:en");
  request.mutable_device()->set_num_samples(42);
  const FleetDevice device = FleetDeviceOf("c9", request);
  EXPECT_EQ(device.client_id, "c9");
  EXPECT_THAT(device.trainers, ElementsAre("kbd"));
  EXPECT_THAT(device.labels, ElementsAre("lang:en"));
  EXPECT_EQ(device.num_samples, 42);
}

TEST(FleetLedgerTest, ADeviceWithoutTrainersTrainsOnlyTheConfigJob) {
  FleetLedger ledger(FleetOptions{}, nullptr);
  EXPECT_EQ(ledger.matcher_name(), "fifo");
  FleetJob main = Job("main", 1);
  main.config_job = true;
  ASSERT_THAT(ledger.AddJob(main), IsOk());
  ASSERT_THAT(ledger.AddJob(Job("other", 2)), IsOk());
  ledger.UpsertDevice(Device("old-app", {}));
  EXPECT_TRUE(ledger.Eligible("old-app", "main"));
  EXPECT_FALSE(ledger.Eligible("old-app", "other"));
  auto main_gate = ledger.Gate("main");
  auto other_gate = ledger.Gate("other");
  main_gate->Settle({}, 0, 0);
  other_gate->Settle({}, 5, 0);
  ledger.Rematch(0);
  EXPECT_FALSE(other_gate->MayPlan("old-app", 0));
  // "main" asks for nobody, but it alone can use the device: the offer is its.
  EXPECT_TRUE(main_gate->MayPlan("old-app", 0));
}

TEST(FleetLedgerTest, AJobWhoseNameOrArchitectureIsListed) {
  FleetLedger ledger(FleetOptions{}, nullptr);
  ASSERT_THAT(ledger.AddJob(Job("kbd", 1, "mlp")), IsOk());
  ASSERT_THAT(ledger.AddJob(Job("rank", 2, "softmax")), IsOk());
  ASSERT_THAT(ledger.AddJob(Job("named", 3, "")), IsOk());
  ledger.UpsertDevice(Device("by-name", {"kbd"}));
  ledger.UpsertDevice(Device("by-arch", {"softmax"}));
  ledger.UpsertDevice(Device("empty-arch", {""}));
  EXPECT_TRUE(ledger.Eligible("by-name", "kbd"));
  EXPECT_FALSE(ledger.Eligible("by-name", "rank"));
  EXPECT_TRUE(ledger.Eligible("by-arch", "rank"));
  EXPECT_FALSE(ledger.Eligible("by-arch", "kbd"));
  // A job without an architecture is trained only by name.
  EXPECT_FALSE(ledger.Eligible("empty-arch", "named"));
  EXPECT_FALSE(ledger.Eligible("unknown", "kbd"));
  EXPECT_FALSE(ledger.Eligible("by-name", "unknown"));
}

TEST(FleetLedgerTest, RequiredLabelsAndMinExamples) {
  FleetLedger ledger(FleetOptions{}, nullptr);
  FleetJob job = Job("en", 1);
  job.population.add_required_labels("lang:en");
  job.population.add_required_labels("class:phone");
  job.population.set_min_examples(50);
  ASSERT_THAT(ledger.AddJob(job), IsOk());
  ledger.UpsertDevice(Device("ok", {"en"}, {"class:phone", "lang:en", "x"}, 50));
  ledger.UpsertDevice(Device("few", {"en"}, {"class:phone", "lang:en"}, 49));
  ledger.UpsertDevice(Device("fr", {"en"}, {"class:phone", "lang:fr"}, 500));
  EXPECT_TRUE(ledger.Eligible("ok", "en"));
  EXPECT_FALSE(ledger.Eligible("few", "en"));
  EXPECT_FALSE(ledger.Eligible("fr", "en"));
  auto gate = ledger.Gate("en");
  ledger.Rematch(0);
  EXPECT_TRUE(gate->MayPlan("ok", 0));
  EXPECT_FALSE(gate->MayPlan("few", 0));
  EXPECT_FALSE(gate->MayPlan("fr", 0));
}

TEST(FleetLedgerTest, AddJobRefusesATakenName) {
  FleetLedger ledger(FleetOptions{}, nullptr);
  ASSERT_THAT(ledger.AddJob(Job("a", 1)), IsOk());
  EXPECT_THAT(ledger.AddJob(Job("a", 2)),
              StatusIs(absl::StatusCode::kAlreadyExists, "job a is already in the fleet"));
}

TEST_F(TwoJobs, FifoOffersTheFirstJobEverythingThenTheRestFlowsOn) {
  Make(FleetOptions{});
  a_->Settle({}, 2, 0);
  b_->Settle({}, 2, 0);
  ledger_->Rematch(0);
  EXPECT_EQ(Offered("a"), 4);
  EXPECT_EQ(Offered("b"), 0);
  EXPECT_THAT(Plannable(*b_), IsEmpty());
  EXPECT_THAT(Plannable(*a_), ElementsAre("d0", "d1", "d2", "d3"));
  // "a" planned d0 and d1; its round runs (demand 0).
  a_->Settle({"d0", "d1"}, 0, 1);
  ledger_->Rematch(1);
  EXPECT_EQ(Offered("b"), 2);
  EXPECT_THAT(Plannable(*b_), ElementsAre("d2", "d3"));
  EXPECT_THAT(Plannable(*a_), IsEmpty());
}

TEST_F(TwoJobs, HoldsProtectAPlanningJobFromRematch) {
  Make(FleetOptions{});
  a_->Settle({}, 2, 0);
  b_->Settle({}, 2, 0);
  ledger_->Rematch(0);
  ASSERT_TRUE(a_->MayPlan("d0", 0));  // "a" is planning with d0
  // Meanwhile "a" stops asking (paused): the next Rematch gives b everything but d0.
  ledger_->SetJobActive("a", false);
  ledger_->Rematch(1);
  EXPECT_THAT(Plannable(*b_), ElementsAre("d1", "d2", "d3"));
  // a's Settle (it planned nobody) releases d0.
  a_->Settle({}, 0, 2);
  ledger_->Rematch(2);
  EXPECT_TRUE(b_->MayPlan("d0", 2));
}

TEST_F(TwoJobs, SettleReleasesHoldsAndRecordsClaims) {
  Make(FleetOptions{});
  a_->Settle({}, 2, 0);
  ledger_->Rematch(0);
  ASSERT_THAT(Plannable(*a_), ElementsAre("d0", "d1", "d2", "d3"));
  a_->Settle({"d1"}, 0, 1);
  EXPECT_THAT(ledger_->JobsOf("d1"), ElementsAre("a"));
  EXPECT_THAT(ledger_->JobsOf("d0"), IsEmpty());
  EXPECT_EQ(ledger_->devices_in_flight(), 1);
  const std::vector<FleetJobView> views = ledger_->Snapshot();
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].name, "a");
  EXPECT_EQ(views[0].in_flight, 1);
  EXPECT_EQ(views[0].demand, 0);
  EXPECT_TRUE(views[0].active);
  b_->Settle({}, 3, 1);
  ledger_->Rematch(1);
  // d1 works for "a": no room for "b" with one job per device.
  EXPECT_THAT(Plannable(*b_), ElementsAre("d0", "d2", "d3"));
  a_->Settle({}, 0, 2);
  EXPECT_EQ(ledger_->devices_in_flight(), 0);
}

// "b" asks while "a" holds a task on d0, with up to `per_device` jobs per device: whether "b"
// may plan d0.
class JobsPerDevice : public TwoJobs {
 protected:
  bool SecondJobMayPlanABusyDevice(int per_device) {
    Make(FleetOptions{.max_jobs_per_device = per_device});
    a_->Settle({"d0"}, 0, 0);
    b_->Settle({}, 4, 0);
    ledger_->Rematch(0);
    EXPECT_TRUE(b_->MayPlan("d1", 0));
    return b_->MayPlan("d0", 0);
  }
};

TEST_F(JobsPerDevice, OneByDefaultAndForZero) {
  EXPECT_FALSE(SecondJobMayPlanABusyDevice(FleetOptions{}.max_jobs_per_device));
  EXPECT_FALSE(SecondJobMayPlanABusyDevice(0));
}

TEST_F(JobsPerDevice, TwoWhenConfigured) {
  ASSERT_TRUE(SecondJobMayPlanABusyDevice(2));
  b_->Settle({"d0"}, 0, 1);
  EXPECT_THAT(ledger_->JobsOf("d0"), UnorderedElementsAre("a", "b"));
  EXPECT_EQ(ledger_->devices_in_flight(), 1);
}

TEST_F(TwoJobs, MaxDevicesInFlightAdmitsJobsInOrderWhileTheyFit) {
  Make(FleetOptions{.max_devices_in_flight = 5}, 8);
  a_->Settle({}, 4, 0);
  b_->Settle({}, 3, 0);
  ledger_->Rematch(0);
  EXPECT_EQ(Offered("a"), 8);
  a_->Settle({"d0", "d1", "d2", "d3"}, 0, 1);
  ledger_->Rematch(1);
  // 4 in flight + 3 asked > 5: "b" waits, even for devices only it could use now.
  EXPECT_EQ(Offered("b"), 0);
  EXPECT_THAT(Plannable(*b_, 8), IsEmpty());
  a_->Settle({"d0"}, 0, 2);
  ledger_->Rematch(2);
  EXPECT_EQ(Offered("b"), 7);
}

TEST_F(TwoJobs, MaxDevicesInFlightKeepsLaterJobsBehindOneThatDoesNotFit) {
  Make(FleetOptions{.max_devices_in_flight = 5}, 8);
  a_->Settle({}, 6, 0);  // more than the bound alone
  b_->Settle({}, 2, 0);
  ledger_->Rematch(0);
  EXPECT_EQ(Offered("a"), 0);
  EXPECT_EQ(Offered("b"), 0);
}

TEST(FleetLedgerTest, MinContributionIntervalStartsWhenATaskEnds) {
  FleetLedger ledger(FleetOptions{}, nullptr);
  FleetJob job = Job("a", 1);
  job.population.set_min_contribution_interval_s(100);
  ASSERT_THAT(ledger.AddJob(job), IsOk());
  ledger.UpsertDevice(Device("d0", {"a"}));
  auto gate = ledger.Gate("a");
  gate->Settle({}, 1, 0);
  ledger.Rematch(0);
  ASSERT_TRUE(gate->MayPlan("d0", 0));
  gate->Settle({"d0"}, 0, 0);
  gate->Settle({}, 1, 10);  // its task ended at 10 s
  ledger.Rematch(50);
  EXPECT_FALSE(gate->MayPlan("d0", 50));
  EXPECT_EQ(ledger.Snapshot()[0].offered, 0);
  ledger.Rematch(109);
  EXPECT_FALSE(gate->MayPlan("d0", 109));
  ledger.Rematch(110);
  EXPECT_TRUE(gate->MayPlan("d0", 110));
  // Planned again; when its engine asks again before Settle, the task has ended at a time the
  // ledger does not know yet: it waits for the Settle.
  gate->Settle({"d0"}, 0, 110);
  ledger.Rematch(300);
  EXPECT_FALSE(gate->MayPlan("d0", 300));
  gate->Settle({}, 1, 300);
  ledger.Rematch(399);
  EXPECT_FALSE(gate->MayPlan("d0", 399));
  ledger.Rematch(400);
  EXPECT_TRUE(gate->MayPlan("d0", 400));
}

TEST_F(TwoJobs, APausedJobGetsNothing) {
  Make(FleetOptions{});
  ASSERT_THAT(ledger_->AddJob(Job("c", 3, "cnn")), IsOk());
  ledger_->UpsertDevice(Device("c-only", {"c"}));
  auto c = ledger_->Gate("c");
  c->Settle({}, 3, 0);
  ledger_->SetJobActive("c", false);
  ledger_->Rematch(0);
  EXPECT_FALSE(c->MayPlan("c-only", 0));
  EXPECT_FALSE(ledger_->Snapshot()[2].active);
  ledger_->SetJobActive("c", true);
  ledger_->Rematch(1);
  EXPECT_TRUE(c->MayPlan("c-only", 1));
}

TEST_F(TwoJobs, RemoveJobFreesItsDevices) {
  Make(FleetOptions{});
  a_->Settle({"d0", "d1"}, 0, 0);
  b_->Settle({}, 2, 0);
  ledger_->RemoveJob("a");
  ledger_->RemoveJob("never-there");
  EXPECT_EQ(ledger_->devices_in_flight(), 0);
  EXPECT_THAT(ledger_->JobsOf("d0"), IsEmpty());
  ledger_->Rematch(1);
  EXPECT_THAT(Plannable(*b_), ElementsAre("d0", "d1", "d2", "d3"));
  // The removed job's gate refuses everything; its Settle is ignored.
  EXPECT_THAT(Plannable(*a_), IsEmpty());
  a_->Settle({"d2"}, 1, 1);
  EXPECT_EQ(ledger_->devices_in_flight(), 0);
}

TEST_F(TwoJobs, RemoveDeviceDropsItsClaims) {
  Make(FleetOptions{});
  a_->Settle({"d0"}, 0, 0);
  ledger_->RemoveDevice("d0");
  EXPECT_EQ(ledger_->devices_in_flight(), 0);
  EXPECT_EQ(ledger_->Snapshot()[0].in_flight, 0);
  EXPECT_FALSE(ledger_->Eligible("d0", "a"));
}

TEST(FleetLedgerTest, ASingleJobSeesEveryEligibleDevice) {
  FleetLedger ledger(FleetOptions{}, nullptr);
  ASSERT_THAT(ledger.AddJob(Job("only", 1)), IsOk());
  for (int i = 0; i < 5; ++i) ledger.UpsertDevice(Device(absl::StrCat("d", i), {"only"}));
  ledger.UpsertDevice(Device("other", {"something-else"}));
  auto gate = ledger.Gate("only");
  // Before its first Settle, and while its round runs (demand 0), it still sees them all: a
  // running round can replace a failed task.
  ledger.Rematch(0);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(gate->MayPlan(absl::StrCat("d", i), 0)) << i;
  EXPECT_FALSE(gate->MayPlan("other", 0));
  gate->Settle({"d0", "d1"}, 0, 1);
  ledger.Rematch(1);
  EXPECT_EQ(ledger.Snapshot()[0].offered, 3);
}

// With one active job the offers are implicit (no device is walked at a rematch) and every
// answer is the one a full rematch gives: an explicit offer from the last full rematch does not
// outlive an admission refusal, the counts match, facts are not asked for.
TEST_F(TwoJobs, OneActiveJobAnswersAsAFullRematch) {
  Make(FleetOptions{.max_devices_in_flight = 1}, 2);
  EXPECT_TRUE(a_->WantsFacts());
  a_->Settle({}, 1, 0);
  b_->Settle({}, 0, 0);
  ledger_->Rematch(0);
  EXPECT_EQ(Offered("a"), 2);  // the first job asking, by FIFO
  EXPECT_THAT(Plannable(*a_, 2), ElementsAre("d0", "d1"));
  a_->Settle({}, 1, 0);
  // b pauses holding d1: no room under max_devices_in_flight, so a is refused.
  b_->Settle({"d1"}, 0, 1);
  ledger_->SetJobActive("b", false);
  EXPECT_FALSE(a_->WantsFacts());
  ledger_->Rematch(1);
  EXPECT_THAT(Plannable(*a_, 2, 1), IsEmpty());
  EXPECT_EQ(Offered("a"), 0);
  // b's task ends: a has room again and sees every idle device, counted as a full rematch would.
  b_->Settle({}, 0, 2);
  ledger_->Rematch(2);
  EXPECT_EQ(Offered("a"), 2);
  EXPECT_EQ(ledger_->Snapshot(/*count_offers=*/false)[0].offered, -1);
  EXPECT_THAT(Plannable(*a_, 2, 2), ElementsAre("d0", "d1"));
  EXPECT_EQ(a_->OfferReason("d0"), kOnlyJobEligible);
  // Back to two jobs: explicit offers again.
  ledger_->SetJobActive("b", true);
  a_->Settle({}, 1, 3);
  b_->Settle({}, 1, 3);
  ledger_->Rematch(3);
  EXPECT_EQ(Offered("a"), 2);
  EXPECT_EQ(Offered("b"), 0);  // refused: one device of room, taken by a's demand
}

TEST(FleetLedgerTest, TheOnlyJobThatCanTrainADeviceNeedNotWaitForRematch) {
  FleetLedger ledger(FleetOptions{}, nullptr);
  ASSERT_THAT(ledger.AddJob(Job("only", 1)), IsOk());
  ASSERT_THAT(ledger.AddJob(Job("other", 2, "cnn")), IsOk());
  auto gate = ledger.Gate("only");
  ledger.Rematch(0);
  // Registered after the Rematch: planned at once, as by a server of one run.
  ledger.UpsertDevice(Device("late", {"only"}));
  EXPECT_TRUE(gate->MayPlan("late", 1));
  gate->Settle({"late"}, 0, 1);
  ledger.Rematch(2);
  // Its task ended (the job's engine asks again before its next Settle): no wait either.
  EXPECT_TRUE(gate->MayPlan("late", 3));
  // A device another job could train waits for the matcher.
  ledger.UpsertDevice(Device("shared", {"only", "other"}));
  EXPECT_FALSE(gate->MayPlan("shared", 3));
  EXPECT_FALSE(ledger.Gate("other")->MayPlan("shared", 3));
}

TEST_F(TwoJobs, NoFallbackOfferWhenTwoJobsCouldUseADevice) {
  Make(FleetOptions{});
  ledger_->Rematch(0);  // neither job asks for anybody
  EXPECT_EQ(Offered("a"), 0);
  EXPECT_EQ(Offered("b"), 0);
}

// A device is never offered to, planned by or held for two jobs at once (one job per device),
// whatever the matcher, over many rematches with jobs planning, finishing tasks and asking.
void CheckExclusive(std::unique_ptr<DeviceJobMatcher> matcher) {
  FleetLedger ledger(FleetOptions{}, std::move(matcher));
  const std::vector<std::string> jobs = {"a", "b", "c"};
  std::map<std::string, std::unique_ptr<round::PlanningGate>> gates;
  std::map<std::string, std::vector<std::string>> in_flight;
  std::map<std::string, int> planned;
  for (size_t j = 0; j < jobs.size(); ++j) {
    ASSERT_THAT(ledger.AddJob(Job(jobs[j], static_cast<int64_t>(j) + 1)), IsOk());
    gates[jobs[j]] = ledger.Gate(jobs[j]);
  }
  for (int i = 0; i < 30; ++i) {
    // Device i trains a and b, or b and c, or all three.
    const std::vector<std::vector<std::string>> kinds = {{"a", "b"}, {"b", "c"}, {"a", "b", "c"}};
    std::vector<std::string> trainers = kinds[i % 3];
    ledger.UpsertDevice(Device(absl::StrCat("d", i), trainers));
  }
  for (int tick = 0; tick < 60; ++tick) {
    const double now = tick;
    ledger.Rematch(now);
    std::map<std::string, std::string> planner_of;
    for (const std::string& job : jobs) {
      std::vector<std::string>& mine = in_flight[job];
      // Every third tick a job's tasks end.
      if ((tick + static_cast<int>(job[0])) % 3 == 0) mine.clear();
      const size_t want = mine.empty() ? 4 : 0;
      for (int i = 0; i < 30 && mine.size() < want; ++i) {
        const std::string id = absl::StrCat("d", i);
        if (!gates[job]->MayPlan(id, now)) continue;
        ASSERT_FALSE(planner_of.contains(id))
            << id << " planned by " << planner_of[id] << " and " << job << " at tick " << tick;
        planner_of[id] = job;
        mine.push_back(id);
        ++planned[job];
      }
      gates[job]->Settle(mine, mine.empty() ? 4 : 0, now);
    }
    for (int i = 0; i < 30; ++i) {
      ASSERT_LE(ledger.JobsOf(absl::StrCat("d", i)).size(), 1u) << "tick " << tick;
    }
  }
  for (const std::string& job : jobs) EXPECT_GT(planned[job], 0) << job;
}

TEST(FleetLedgerTest, ADeviceIsNeverPlannedByTwoJobsFifo) { CheckExclusive(MakeFifoMatcher()); }

TEST(FleetLedgerTest, ADeviceIsNeverPlannedByTwoJobsRandom) {
  CheckExclusive(MakeRandomMatcher(5));
}

TEST(FleetLedgerTest, ADeviceIsNeverPlannedByTwoJobsVenn) { CheckExclusive(MakeVennMatcher(5)); }

TEST(FleetLedgerTest, ADeviceIsNeverPlannedByTwoJobsFedsched) {
  CheckExclusive(MakeClientAwareMatcher(5));
}

// A matcher that deals the devices round-robin over the jobs each can train that ask: a split
// under which no job may reach its demand.
class DealingMatcher : public DeviceJobMatcher {
 public:
  std::string_view name() const override { return "dealing"; }
  void Match(const MatchInput& input, std::vector<int>* job_of_device) override {
    job_of_device->assign(input.devices.size(), -1);
    for (size_t k = 0; k < input.devices.size(); ++k) {
      std::vector<int> asking;
      for (int j : input.devices[k].eligible) {
        if (input.jobs[j].demand > 0) asking.push_back(j);
      }
      if (!asking.empty()) (*job_of_device)[k] = asking[k % asking.size()];
    }
  }
};

TEST(FleetLedgerTest, WhenNoJobCanStartTheLongestWaitingOneThatCouldGetsItsDevicesAfterTheGrace) {
  FleetLedger ledger(FleetOptions{}, std::make_unique<DealingMatcher>());
  for (const std::string job : {"a", "b", "c"}) {
    ASSERT_THAT(ledger.AddJob(Job(job, job[0] - 'a' + 1)), IsOk());
  }
  std::map<std::string, std::unique_ptr<round::PlanningGate>> gates;
  for (const std::string job : {"a", "b", "c"}) gates[job] = ledger.Gate(job);
  for (int i = 0; i < 30; ++i) ledger.UpsertDevice(Device(absl::StrCat("d", i), {"a", "b", "c"}));
  // "b" asks first; each asks for 20 of the 30 devices, and the dealing gives each 10.
  gates["b"]->Settle({}, 20, 0);
  gates["a"]->Settle({}, 20, 5);
  gates["c"]->Settle({}, 20, 5);
  auto offered = [&](const std::string& job) {
    for (const FleetJobView& v : ledger.Snapshot()) {
      if (v.name == job) return v.offered;
    }
    return int64_t{-1};
  };
  ledger.Rematch(kStallGraceS - 1);
  EXPECT_EQ(offered("a"), 10);
  EXPECT_EQ(offered("b"), 10);
  EXPECT_EQ(offered("c"), 10);
  ledger.Rematch(kStallGraceS);
  EXPECT_EQ(offered("a"), 0);
  EXPECT_EQ(offered("b"), 30);
  EXPECT_EQ(offered("c"), 0);
  EXPECT_EQ(gates["b"]->OfferReason("d0"), kStallBroken);
  // "b" runs its round on 20 devices; 10 are left, less than "a" or "c" asks for: nobody could
  // start, so the dealing stands.
  std::vector<std::string> cohort;
  for (int i = 0; i < 20; ++i) cohort.push_back(absl::StrCat("d", i));
  gates["b"]->Settle(cohort, 0, kStallGraceS + 1);
  ledger.Rematch(kStallGraceS + 2);
  EXPECT_EQ(offered("a"), 5);
  EXPECT_EQ(offered("c"), 5);
}

// Three jobs over 30 devices that train all three, each needing 20 to start (it asks for
// ceil(1.3 x 20) = 26, over-committed, and reports 20 as its minimum, as a round engine does) and
// running rounds of 5 s; under the dealing matcher none is ever offered 20. The guard starts the
// longest waiting one; when its round ends it asks again, now the newest wait, so the jobs take
// turns and each keeps committing rounds.
TEST(FleetLedgerTest, UnderASplitThatStartsNoJobTheJobsTakeTurns) {
  FleetLedger ledger(FleetOptions{}, std::make_unique<DealingMatcher>());
  const std::vector<std::string> jobs = {"a", "b", "c"};
  std::map<std::string, std::unique_ptr<round::PlanningGate>> gates;
  for (size_t j = 0; j < jobs.size(); ++j) {
    ASSERT_THAT(ledger.AddJob(Job(jobs[j], static_cast<int64_t>(j) + 1)), IsOk());
    gates[jobs[j]] = ledger.Gate(jobs[j]);
  }
  for (int i = 0; i < 30; ++i) ledger.UpsertDevice(Device(absl::StrCat("d", i), jobs));
  std::map<std::string, std::vector<std::string>> in_flight;
  std::map<std::string, double> round_ends;
  std::map<std::string, int> rounds;
  for (int tick = 0; tick < 600; ++tick) {
    const double now = tick;
    ledger.Rematch(now);
    for (const std::string& job : jobs) {
      std::vector<std::string>& mine = in_flight[job];
      if (!mine.empty() && now >= round_ends[job]) {
        mine.clear();
        ++rounds[job];
      }
      if (mine.empty()) {
        std::vector<std::string> reachable;
        for (int i = 0; i < 30; ++i) {
          const std::string id = absl::StrCat("d", i);
          if (gates[job]->MayPlan(id, now)) reachable.push_back(id);
        }
        if (reachable.size() >= 20) {
          mine.assign(reachable.begin(),
                      reachable.begin() + std::min<size_t>(26, reachable.size()));
          round_ends[job] = now + 5;
        }
      }
      gates[job]->Settle(mine, mine.empty() ? 26 : 0, now);
      round::JobFacts facts;
      facts.clients_per_round = 20;
      facts.min_clients = 20;
      gates[job]->Describe(std::move(facts), now);
    }
  }
  // A turn takes the grace (30 s) plus a round: about 16 turns in 600 s, shared by three jobs.
  for (const std::string& job : jobs) EXPECT_GE(rounds[job], 4) << job;
}

}  // namespace
}  // namespace fedsched::jobs

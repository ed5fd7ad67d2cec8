#include "server/jobs/matcher.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::jobs {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

MatchJob Job(std::string name, int32_t priority, int64_t sequence, int64_t demand) {
  MatchJob job;
  job.name = std::move(name);
  job.priority = priority;
  job.sequence = sequence;
  job.demand = demand;
  return job;
}

MatchDevice Device(std::string id, std::vector<int> eligible) {
  return MatchDevice{std::move(id), std::move(eligible)};
}

TEST(MatcherRegistryTest, BuiltInsAreRegisteredAndEmptyMeansFifo) {
  const std::vector<std::string> names = MatcherNames();
  EXPECT_THAT(names, ::testing::IsSupersetOf({"fedsched", "fifo", "random", "venn"}));
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceJobMatcher> fifo, MakeMatcher("", 1));
  EXPECT_EQ(fifo->name(), "fifo");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceJobMatcher> random, MakeMatcher("random", 1));
  EXPECT_EQ(random->name(), "random");
}

TEST(MatcherRegistryTest, UnknownNameListsTheRegisteredOnes) {
  EXPECT_THAT(MakeMatcher("lottery", 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("lottery"), HasSubstr("fifo"), HasSubstr("random"))));
}

TEST(MatcherRegistryTest, RegisterChecksNamesAndRefusesTakenOnes) {
  EXPECT_THAT(RegisterMatcher("Bad Name", [](uint64_t) { return MakeFifoMatcher(); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Bad Name")));
  EXPECT_THAT(RegisterMatcher("fifo", [](uint64_t) { return MakeFifoMatcher(); }),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("fifo")));
  ASSERT_THAT(RegisterMatcher("test_seeded", [](uint64_t seed) { return MakeRandomMatcher(seed); }),
              IsOk());
  EXPECT_THAT(MatcherNames(), ::testing::Contains("test_seeded"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceJobMatcher> m, MakeMatcher("test_seeded", 3));
  EXPECT_EQ(m->name(), "random");
}

TEST(FifoMatcherTest, OffersEachDeviceToTheFirstJobByPriorityThenSequence) {
  MatchInput input;
  // Job 0 arrived first, job 1 second with a higher priority, job 2 third.
  input.jobs = {Job("a", 0, 1, 5), Job("b", 5, 2, 5), Job("c", 0, 3, 5)};
  input.devices = {Device("d0", {0, 1, 2}), Device("d1", {0, 2}), Device("d2", {2}),
                   Device("d3", {})};
  std::vector<int> offers;
  MakeFifoMatcher()->Match(input, &offers);
  EXPECT_THAT(offers, ElementsAre(1, 0, 2, -1));
}

TEST(FifoMatcherTest, JobsWithoutDemandAreSkipped) {
  MatchInput input;
  input.jobs = {Job("a", 0, 1, 0), Job("b", 0, 2, 3)};
  input.devices = {Device("d0", {0, 1}), Device("d1", {0})};
  std::vector<int> offers;
  MakeFifoMatcher()->Match(input, &offers);
  // d1 could go only to "a", which asks for nobody.
  EXPECT_THAT(offers, ElementsAre(1, -1));
}

TEST(FifoMatcherTest, TheFirstJobSeesItsWholeEligiblePool) {
  MatchInput input;
  input.jobs = {Job("a", 0, 1, 1), Job("b", 0, 2, 1)};
  for (int i = 0; i < 5; ++i) input.devices.push_back(Device("d" + std::to_string(i), {0, 1}));
  std::vector<int> offers;
  MakeFifoMatcher()->Match(input, &offers);
  EXPECT_THAT(offers, ElementsAre(0, 0, 0, 0, 0));
}

std::vector<int> RunRandom(uint64_t seed, const MatchInput& input, int calls) {
  std::unique_ptr<DeviceJobMatcher> matcher = MakeRandomMatcher(seed);
  std::vector<int> all;
  std::vector<int> offers;
  for (int c = 0; c < calls; ++c) {
    matcher->Match(input, &offers);
    all.insert(all.end(), offers.begin(), offers.end());
  }
  return all;
}

MatchInput ThreeJobsInput(int devices) {
  MatchInput input;
  input.jobs = {Job("a", 0, 1, 4), Job("b", 0, 2, 0), Job("c", 9, 3, 4), Job("d", 0, 4, 4)};
  for (int i = 0; i < devices; ++i) {
    // Eligible for a, b (no demand) and c; every fourth device also for d.
    std::vector<int> eligible = {0, 1, 2};
    if (i % 4 == 0) eligible.push_back(3);
    input.devices.push_back(Device("d" + std::to_string(i), eligible));
  }
  return input;
}

TEST(RandomMatcherTest, DeterministicForASeedAndAdvancedByEveryCall) {
  const MatchInput input = ThreeJobsInput(50);
  EXPECT_EQ(RunRandom(7, input, 3), RunRandom(7, input, 3));
  EXPECT_NE(RunRandom(7, input, 3), RunRandom(8, input, 3));
  const std::vector<int> two_calls = RunRandom(7, input, 2);
  EXPECT_NE(std::vector<int>(two_calls.begin(), two_calls.begin() + 50),
            std::vector<int>(two_calls.begin() + 50, two_calls.end()));
}

TEST(RandomMatcherTest, UniformOverTheEligibleJobsWithDemand) {
  const MatchInput input = ThreeJobsInput(400);
  const std::vector<int> offers = RunRandom(11, input, 10);
  std::map<int, int> three_way;  // devices eligible for a, c and d
  std::map<int, int> two_way;    // devices eligible for a and c
  for (size_t k = 0; k < offers.size(); ++k) {
    ASSERT_NE(offers[k], 1) << "job b has no demand";
    ASSERT_GE(offers[k], 0);
    (k % 400 % 4 == 0 ? three_way : two_way)[offers[k]]++;
  }
  // 1000 three-way draws: 333 expected each; 3000 two-way draws: 1500 each (bounds ~5 sigma).
  for (int j : {0, 2, 3}) EXPECT_NEAR(three_way[j], 333, 80) << "job " << j;
  EXPECT_EQ(two_way.count(3), 0u);
  for (int j : {0, 2}) EXPECT_NEAR(two_way[j], 1500, 140) << "job " << j;
}

}  // namespace
}  // namespace fedsched::jobs

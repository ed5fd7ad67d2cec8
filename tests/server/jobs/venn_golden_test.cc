// Venn's group allocation (server/jobs/venn_irs.h) against golden values from Venn's own
// implementation: SymbioticLab/Venn at commit f8ada37ae94456c839551e077703882b210ee0e2,
// src/irs.py, IRS.add_request(job, demand, group) for every job below, then
// IRS.schedule_first_request_per_group(checkins) with the check-in eligibility lists below, in
// that order. The expected group of each check-in is the group of the returned plan whose set
// holds that check-in's eligibility tuple and has waiting jobs (what IRS.schedule_task serves
// it to), -1 for none. The "random" cases were drawn once (Python's random.Random(45): 14
// check-ins of 1 to 3 of 4 groups, 3 to 6 jobs with demands 1 to 40) and are written out here.

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/venn_irs.h"

namespace fedsched::jobs {
namespace {

using ::testing::ElementsAreArray;

struct GoldenCase {
  std::string name;
  std::vector<std::vector<int>> checkins;
  std::vector<VennQueue> queues;  // per group, its jobs' demands in the order they were added
  std::vector<int> expected;      // per check-in, its group or -1
};

const std::vector<GoldenCase>& Cases() {
  static const auto* cases = new std::vector<GoldenCase>{
      {"nested",
       {{0}, {0, 1}, {0, 1}, {1}, {0, 1, 2}, {2}},
       {{0, {10}}, {1, {5}}, {2, {3}}},
       {0, 0, 0, 1, 2, 2}},
      {"merge_small_into_large",
       {{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {1}, {1}},
       {{0, {4, 4, 4}}, {1, {100}}},
       {0, 0, 0, 0, 0, 0, 0, 0, 1, 1}},
      {"no_merge",
       {{0, 1}, {0, 1}, {0, 1}, {1}, {1}, {1}, {1}, {1}, {1}},
       {{0, {50}}, {1, {2, 3}}},
       {0, 0, 0, 1, 1, 1, 1, 1, 1}},
      {"idle_group_absorbed",
       {{0}, {0}, {1}, {1}, {1}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {2}},
       {{0, {6}}, {1, {2}}},
       {0, 0, 1, 1, 1, 0, 0, 0, 0, 0}},
      {"ties_first_seen",
       {{1, 0}, {0}, {1}, {2, 1, 0}, {2}},
       {{0, {3}}, {1, {3}}, {2, {3}}},
       {1, 0, 1, 2, 2}},
      {"starved_count_one",
       {{0, 1}, {0, 1}, {1}, {1}, {1}},
       {{0, {7}}, {1, {1, 2}}},
       {1, 1, 1, 1, 1}},
      {"equal_overlap", {{0, 1}, {0, 1}}, {{0, {5}}, {1, {1}}}, {0, 0}},
      {"queued_group_without_checkins",
       {{0}, {0}, {0}, {0, 1}},
       {{0, {2}}, {5, {4}}},
       {0, 0, 0, 0}},
      {"chain_merge",
       {{0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {1, 2}, {1, 2}, {2}},
       {{0, {1, 1, 1, 1}}, {1, {30}}, {2, {40}}},
       {0, 0, 0, 0, 0, 0, 1, 1, 2}},
      {"three_way",
       {{0},
        {0, 1},
        {0, 1},
        {0, 1},
        {0, 1, 2},
        {0, 1, 2},
        {0, 1, 2},
        {0, 1, 2},
        {0, 1, 2},
        {1, 2},
        {1, 2},
        {2},
        {2},
        {2},
        {2}},
       {{0, {3}}, {1, {20, 4}}, {2, {9, 1}}},
       {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 2, 2}},
      {"random0",
       {{3, 1},
        {0, 1},
        {0, 3},
        {0, 3},
        {0, 1},
        {0, 2, 3},
        {2},
        {1, 0, 3},
        {3},
        {0},
        {1},
        {2, 1},
        {2, 0, 1},
        {0}},
       {{3, {21}}, {2, {34, 32, 14}}, {0, {38}}},
       {3, 0, 3, 3, 0, 2, 2, 3, 3, 0, 0, 2, 2, 0}},
      {"random1",
       {{0},
        {3},
        {3, 1, 0},
        {3, 1},
        {3},
        {0, 2, 1},
        {0},
        {2, 1, 3},
        {1},
        {2},
        {3},
        {0},
        {2, 3, 1},
        {3, 0}},
       {{1, {18, 34}}, {0, {32, 10}}, {2, {39}}},
       {0, -1, 0, 1, -1, 1, 0, 1, 1, 1, -1, 0, 1, 0}},
      {"random2",
       {{0, 3},
        {1, 0, 2},
        {1},
        {1, 0},
        {3, 1, 2},
        {3, 1},
        {0},
        {2},
        {3, 0, 1},
        {3, 2},
        {3},
        {0, 2, 1},
        {0, 2, 1},
        {0, 3, 2}},
       {{0, {4}}, {2, {6, 37}}, {3, {21}}},
       {0, 2, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2, 2, 0}},
      {"random3",
       {{3, 2, 0},
        {3, 2, 1},
        {3, 2, 0},
        {1, 3},
        {0},
        {2, 0},
        {1, 3, 2},
        {0},
        {2, 3},
        {0},
        {3, 2, 0},
        {1, 2, 0},
        {0},
        {2}},
       {{1, {36, 25, 2}}, {2, {40, 26}}},
       {2, 1, 2, 1, 2, 2, 1, 2, 2, 2, 2, 1, 2, 2}},
  };
  return *cases;
}

TEST(VennGoldenTest, OneEntryPerCheckinMatchesVenn) {
  for (const GoldenCase& c : Cases()) {
    std::vector<VennCheckin> checkins;
    for (const std::vector<int>& groups : c.checkins) checkins.push_back({groups, 1});
    EXPECT_THAT(VennGroupAllocation(checkins, c.queues), ElementsAreArray(c.expected)) << c.name;
  }
}

TEST(VennGoldenTest, CountedKindsMatchVenn) {
  // Equal eligibility lists folded into one kind with a count, as the "venn" matcher passes
  // them: every device of a kind gets the group Venn gave each of them.
  for (const GoldenCase& c : Cases()) {
    std::vector<VennCheckin> kinds;
    std::map<std::vector<int>, size_t> kind_of;
    std::vector<size_t> kind_of_checkin;
    for (const std::vector<int>& groups : c.checkins) {
      auto [it, added] = kind_of.emplace(groups, kinds.size());
      if (added) kinds.push_back({groups, 0});
      ++kinds[it->second].count;
      kind_of_checkin.push_back(it->second);
    }
    const std::vector<int> group_of_kind = VennGroupAllocation(kinds, c.queues);
    std::vector<int> got;
    for (size_t k : kind_of_checkin) got.push_back(group_of_kind[k]);
    EXPECT_THAT(got, ElementsAreArray(c.expected)) << c.name;
  }
}

TEST(VennIrsTest, NoCheckinsNoAllocation) {
  EXPECT_TRUE(VennGroupAllocation({}, {{0, {3}}}).empty());
  EXPECT_THAT(VennGroupAllocation({{{0}, 2}}, {}), ElementsAreArray({-1}));
}

}  // namespace
}  // namespace fedsched::jobs

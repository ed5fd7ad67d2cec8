// UploadGate (server/service/upload_gate.h): uploads within the budget are admitted at once, the
// others wait in order and are resumed as bytes are released, a stalled gate admits the oldest
// waiter, and a cancelled waiter is never resumed.
#include "server/service/upload_gate.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fedsched {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(UploadGateTest, ServerBudgetKeepsUploadsAndOneParsedUpdateWithinMaxOfTwoModelsAnd8MiB) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  EXPECT_EQ(ReceivingUploadBudget(1, 400'000), 8 * kMiB - 400'000);      // 19 of 100k floats
  EXPECT_EQ(ReceivingUploadBudget(1, 4'000'000), 8 * kMiB - 4'000'000);  // one of 1M
  EXPECT_EQ(ReceivingUploadBudget(1, 40'000'000), 40'000'000);           // one of 10M
  EXPECT_EQ(ReceivingUploadBudget(2.5, 40'000'000), 100'000'000);
  EXPECT_EQ(ReceivingUploadBudget(0, 4'000'000), 0);  // no gate
  EXPECT_EQ(ReceivingUploadBudget(-1, 4'000'000), 0);
}

TEST(UploadGateTest, AdmitsWithinTheBudgetAndResumesWaitersInOrder) {
  UploadGate gate(/*budget_bytes=*/100, absl::Seconds(1));
  std::vector<int> resumed;
  uint64_t t1, t2, t3, t4;
  EXPECT_TRUE(gate.Acquire(60, kT0, &t1, [&] { resumed.push_back(1); }));
  EXPECT_TRUE(gate.Acquire(40, kT0, &t2, [&] { resumed.push_back(2); }));
  EXPECT_FALSE(gate.Acquire(50, kT0, &t3, [&] { resumed.push_back(3); }));
  // FIFO: a small upload does not overtake the waiting one.
  EXPECT_FALSE(gate.Acquire(10, kT0, &t4, [&] { resumed.push_back(4); }));
  EXPECT_EQ(gate.admitted_bytes(), 100);
  EXPECT_EQ(gate.waiting(), 2);
  gate.Release(40, kT0);  // 60 admitted: 50 does not fit yet
  EXPECT_TRUE(resumed.empty());
  gate.Release(60, kT0);  // 0 admitted: 50 and then 10 fit
  EXPECT_EQ(resumed, (std::vector<int>{3, 4}));
  EXPECT_EQ(gate.admitted_bytes(), 60);
  EXPECT_EQ(gate.waiting(), 0);
}

TEST(UploadGateTest, AnUploadLargerThanTheBudgetIsAdmittedAlone) {
  UploadGate gate(/*budget_bytes=*/100, absl::Seconds(1));
  uint64_t t1, t2;
  bool resumed = false;
  EXPECT_TRUE(gate.Acquire(500, kT0, &t1, [] {}));
  EXPECT_FALSE(gate.Acquire(500, kT0, &t2, [&] { resumed = true; }));
  gate.Release(500, kT0);
  EXPECT_TRUE(resumed);
}

TEST(UploadGateTest, AStalledGateAdmitsTheOldestWaiter) {
  UploadGate gate(/*budget_bytes=*/100, absl::Seconds(1));
  std::vector<int> resumed;
  uint64_t t1, t2, t3;
  EXPECT_TRUE(gate.Acquire(100, kT0, &t1, [] {}));
  EXPECT_FALSE(gate.Acquire(100, kT0, &t2, [&] { resumed.push_back(2); }));
  EXPECT_FALSE(gate.Acquire(100, kT0, &t3, [&] { resumed.push_back(3); }));
  gate.NoteProgress(kT0 + absl::Milliseconds(900));
  gate.Poll(kT0 + absl::Milliseconds(1500));  // progress 0.6 s ago: not stalled
  EXPECT_TRUE(resumed.empty());
  gate.Poll(kT0 + absl::Milliseconds(1950));  // 1.05 s without progress: one more
  EXPECT_EQ(resumed, (std::vector<int>{2}));
  EXPECT_EQ(gate.admitted_bytes(), 200);
  gate.Poll(kT0 + absl::Milliseconds(2000));  // the stall clock restarted
  EXPECT_EQ(resumed, (std::vector<int>{2}));
}

TEST(UploadGateTest, ACancelledWaiterIsNeverResumed) {
  UploadGate gate(/*budget_bytes=*/100, absl::Seconds(1));
  uint64_t t1, t2;
  bool resumed = false;
  EXPECT_TRUE(gate.Acquire(100, kT0, &t1, [] {}));
  EXPECT_FALSE(gate.Cancel(t1));  // admitted, not waiting
  EXPECT_FALSE(gate.Acquire(100, kT0, &t2, [&] { resumed = true; }));
  EXPECT_TRUE(gate.Cancel(t2));
  EXPECT_FALSE(gate.Cancel(t2));
  gate.Release(100, kT0);
  EXPECT_FALSE(resumed);
  EXPECT_EQ(gate.admitted_bytes(), 0);
}

TEST(UploadGateTest, ABigJobsUploadsCannotStarveASmallJobs) {
  UploadGate gate(/*budget_bytes=*/100, absl::Seconds(1), /*max_job_share=*/0.5);
  std::vector<std::string> resumed;
  uint64_t t;
  // Alone, the big job may fill the budget.
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(gate.Acquire(
        25, kT0, &t, [] {}, "big"));
  EXPECT_FALSE(gate.Acquire(
      25, kT0, &t, [&] { resumed.push_back("big5"); }, "big"));
  EXPECT_FALSE(gate.Acquire(
      25, kT0, &t, [&] { resumed.push_back("big6"); }, "big"));
  EXPECT_FALSE(gate.Acquire(
      10, kT0, &t, [&] { resumed.push_back("small1"); }, "small"));
  // A big upload ends: the big job holds 75 > its half while the small one waits, so the
  // small upload goes first, past the big job's older waiters.
  gate.Release(25, kT0, "big");
  EXPECT_EQ(resumed, (std::vector<std::string>{"small1"}));
  // A newcomer of the small job overtakes them too.
  EXPECT_TRUE(gate.Acquire(
      10, kT0, &t, [] {}, "small"));
  // Nobody of another job waits now: the big job's waiters are admitted as bytes come back.
  gate.Release(10, kT0, "small");
  gate.Release(10, kT0, "small");
  EXPECT_EQ(resumed, (std::vector<std::string>{"small1", "big5"}));
  gate.Release(25, kT0, "big");
  EXPECT_EQ(resumed, (std::vector<std::string>{"small1", "big5", "big6"}));
  EXPECT_EQ(gate.admitted_bytes(), 100);
  EXPECT_EQ(gate.waiting(), 0);
}

TEST(UploadGateTest, AJobHoldingNothingMayTakeOneUploadLargerThanItsShare) {
  UploadGate gate(/*budget_bytes=*/100, absl::Seconds(1), /*max_job_share=*/0.5);
  std::vector<std::string> resumed;
  uint64_t t;
  EXPECT_TRUE(gate.Acquire(
      30, kT0, &t, [] {}, "a"));
  EXPECT_FALSE(gate.Acquire(
      80, kT0, &t, [&] { resumed.push_back("a80"); }, "a"));
  // b holds nothing: its 60 (more than half) is admitted past a's waiter, which is over a's
  // half now that b waits.
  EXPECT_TRUE(gate.Acquire(
      60, kT0, &t, [] {}, "b"));
  // A second one of b would exceed b's half while a waits.
  EXPECT_FALSE(gate.Acquire(
      5, kT0, &t, [&] { resumed.push_back("b5"); }, "b"));
  gate.Release(30, kT0, "a");  // a holds nothing: its 80 is next, once it fits
  EXPECT_TRUE(resumed.empty());
  gate.Release(60, kT0, "b");
  EXPECT_EQ(resumed, (std::vector<std::string>{"a80", "b5"}));
}

TEST(UploadGateTest, WithoutJobsOrWithAFullShareTheGateIsOneFifo) {
  for (double share : {1.0, 0.5}) {
    UploadGate gate(/*budget_bytes=*/100, absl::Seconds(1), share);
    std::vector<int> resumed;
    uint64_t t;
    const std::string job = share < 1 ? "only" : "";
    EXPECT_TRUE(gate.Acquire(
        60, kT0, &t, [] {}, job));
    EXPECT_TRUE(gate.Acquire(
        40, kT0, &t, [] {}, job));
    EXPECT_FALSE(gate.Acquire(
        50, kT0, &t, [&] { resumed.push_back(3); }, job));
    EXPECT_FALSE(gate.Acquire(
        10, kT0, &t, [&] { resumed.push_back(4); }, job));
    gate.Release(40, kT0, job);
    EXPECT_TRUE(resumed.empty()) << share;
    gate.Release(60, kT0, job);
    EXPECT_EQ(resumed, (std::vector<int>{3, 4})) << share;
  }
}

TEST(UploadGateTest, NoBudgetAdmitsEverything) {
  UploadGate gate(/*budget_bytes=*/0, absl::Seconds(1));
  uint64_t t;
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(gate.Acquire(1 << 30, kT0, &t, [] {}));
  EXPECT_EQ(gate.waiting(), 0);
}

}  // namespace
}  // namespace fedsched

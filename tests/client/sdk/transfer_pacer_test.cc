// TransferPacer: the wait per chunk that holds a transfer to bandwidth_kbps, computed from a
// passed-in clock (--bandwidth_kbps paces the stream, it does not sleep after).
#include "client/sdk/transfer_pacer.h"

#include "gtest/gtest.h"

namespace fedsched {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

TEST(TransferPacerTest, WaitsSoThatEachChunkLeavesAtTheConfiguredRate) {
  // 8 kbit/s = 1000 bytes/s: 250-byte chunks, each moved instantly, are 0.25 s apart.
  TransferPacer pacer(8, kT0);
  EXPECT_EQ(pacer.Account(250, kT0), absl::Milliseconds(250));
  EXPECT_EQ(pacer.Account(250, kT0 + absl::Milliseconds(250)), absl::Milliseconds(250));
  EXPECT_EQ(pacer.Account(500, kT0 + absl::Milliseconds(500)), absl::Milliseconds(500));
  // 1000 bytes by 1.0 s in total: the whole transfer took bytes x 8 / kbps.
}

TEST(TransferPacerTest, TimeSpentMovingTheChunkCountsTowardsTheBudget) {
  TransferPacer pacer(8, kT0);
  // The first 500 bytes took 0.4 s on the wire: only 0.1 s more to wait.
  EXPECT_EQ(pacer.Account(500, kT0 + absl::Milliseconds(400)), absl::Milliseconds(100));
  // Descheduled for 2 s: behind the budget, no wait (never catches up a delay twice) ...
  EXPECT_EQ(pacer.Account(500, kT0 + absl::Seconds(3)), absl::ZeroDuration());
  // ... and the budget stays cumulative from the start: 2000 bytes are due by 2 s.
  EXPECT_EQ(pacer.Account(1000, kT0 + absl::Seconds(3)), absl::ZeroDuration());
  EXPECT_EQ(pacer.Account(2000, kT0 + absl::Seconds(3)), absl::Seconds(1));
}

TEST(TransferPacerTest, UnpacedWithoutABandwidth) {
  TransferPacer pacer(0, kT0);
  EXPECT_EQ(pacer.Account(1 << 30, kT0), absl::ZeroDuration());
  TransferPacer negative(-5, kT0);
  EXPECT_EQ(negative.Account(1000, kT0), absl::ZeroDuration());
  EXPECT_EQ(TransferPacer::SecondsFor(1000, 0), 0);
}

TEST(TransferPacerTest, SecondsForATransfer) {
  // 50 MB at 10,000 kbit/s = 40 s.
  EXPECT_DOUBLE_EQ(TransferPacer::SecondsFor(50'000'000, 10'000), 40.0);
  EXPECT_DOUBLE_EQ(TransferPacer::SecondsFor(-1, 10), 0.0);
}

}  // namespace
}  // namespace fedsched

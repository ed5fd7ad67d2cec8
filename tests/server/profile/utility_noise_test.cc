// server/profile/utility_noise.h: the scale of the noise on the utility report (Oort, OSDI 2021;
// docs/guides/PRIVACY.md "Noise on the utility report") is the factor times the median reported
// utility.
#include "server/profile/utility_noise.h"

#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace fedsched::profile {
namespace {

// A book of `n` registered clients, none of which has reported a utility.
std::unique_ptr<ProfileBook> BookOf(int n) {
  absl::StatusOr<std::unique_ptr<ProfileBook>> book = ProfileBook::Create({});
  EXPECT_TRUE(book.ok()) << book.status();
  for (int i = 0; i < n; ++i) {
    v1::DeviceProfile device;
    device.set_num_samples(100);
    EXPECT_TRUE((*book)->OnRegister(absl::StrCat("dev-", i), device, 0).ok());
  }
  return std::move(book).value();
}

// Client `index` completes a task of round 1 reporting `utility`.
void Report(ProfileBook& book, ClientIndex index, double utility) {
  v1::UpdateMetrics m;
  m.set_num_examples(10);
  m.set_train_seconds(1);
  m.set_statistical_utility(utility);
  ASSERT_OK(book.OnTaskAssigned(index, 1, 1.0));
  ASSERT_OK(book.OnTaskSucceeded(index, m, {.completion_s = 2.0}, 3.0));
}

TEST(UtilityNoiseTest, NoReportsYetMeansNoMedianAndNoNoise) {
  std::unique_ptr<ProfileBook> book = BookOf(3);
  EXPECT_EQ(MedianReportedUtility(*book), std::nullopt);
  EXPECT_EQ(UtilityNoiseStddev(*book, 0.5), 0.0);
  std::unique_ptr<ProfileBook> empty = BookOf(0);
  EXPECT_EQ(UtilityNoiseStddev(*empty, 0.5), 0.0);
}

TEST(UtilityNoiseTest, MedianOverTheClientsThatReported) {
  std::unique_ptr<ProfileBook> book = BookOf(5);
  Report(*book, 0, 40);
  Report(*book, 3, 10);
  Report(*book, 4, 1000);  // an outlier moves the median no further than one rank
  // Clients 1 and 2 never reported: they do not pull the median towards 0.
  EXPECT_EQ(MedianReportedUtility(*book), 40.0);
  EXPECT_DOUBLE_EQ(UtilityNoiseStddev(*book, 0.5), 20.0);
  Report(*book, 1, 20);  // even count: the mean of the two middle values (20, 40)
  EXPECT_EQ(MedianReportedUtility(*book), 30.0);
  EXPECT_DOUBLE_EQ(UtilityNoiseStddev(*book, 2.0), 60.0);
}

TEST(UtilityNoiseTest, FactorZeroIsOff) {
  std::unique_ptr<ProfileBook> book = BookOf(2);
  Report(*book, 0, 7);
  EXPECT_EQ(UtilityNoiseStddev(*book, 0.0), 0.0);
}

TEST(UtilityNoiseTest, RetiredClientsLeaveTheMedian) {
  std::unique_ptr<ProfileBook> book = BookOf(3);
  Report(*book, 0, 10);
  Report(*book, 1, 20);
  Report(*book, 2, 90);
  EXPECT_EQ(MedianReportedUtility(*book), 20.0);
  ASSERT_OK(book->Retire(2));
  EXPECT_EQ(MedianReportedUtility(*book), 15.0);
}

}  // namespace
}  // namespace fedsched::profile

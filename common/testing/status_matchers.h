// GoogleTest matchers for absl::Status / StatusOr (abseil 20220623 ships none).
//   EXPECT_THAT(s, IsOk());
//   EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shape")));
//   ASSERT_OK_AND_ASSIGN(auto v, MakeThing());
#ifndef FEDSCHED_COMMON_TESTING_STATUS_MATCHERS_H_
#define FEDSCHED_COMMON_TESTING_STATUS_MATCHERS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = ::fedsched::testing::GetStatus(arg);
  if (!s.ok()) *result_listener << "status: " << s;
  return s.ok();
}

MATCHER_P2(StatusIs, code, message_matcher, "has code " + ::testing::PrintToString(code)) {
  const absl::Status& s = ::fedsched::testing::GetStatus(arg);
  *result_listener << "status: " << s;
  return s.code() == code &&
         ::testing::ExplainMatchResult(message_matcher, std::string(s.message()), result_listener);
}

}  // namespace fedsched::testing

#define FEDSCHED_TESTING_CONCAT_INNER_(a, b) a##b
#define FEDSCHED_TESTING_CONCAT_(a, b) FEDSCHED_TESTING_CONCAT_INNER_(a, b)
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr)                     \
  auto FEDSCHED_TESTING_CONCAT_(_so_, __LINE__) = (rexpr);   \
  ASSERT_TRUE(FEDSCHED_TESTING_CONCAT_(_so_, __LINE__).ok()) \
      << FEDSCHED_TESTING_CONCAT_(_so_, __LINE__).status();  \
  lhs = std::move(FEDSCHED_TESTING_CONCAT_(_so_, __LINE__)).value()
#define ASSERT_OK(expr) ASSERT_THAT((expr), ::fedsched::testing::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::fedsched::testing::IsOk())

#endif  // FEDSCHED_COMMON_TESTING_STATUS_MATCHERS_H_

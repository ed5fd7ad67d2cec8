#include "sim/engine/event_queue.h"

#include <vector>

#include "common/testing/status_matchers.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::StatusIs;

TEST(EventQueueTest, OrdersByTimeThenInsertion) {
  EventQueue q;
  ASSERT_OK(q.Push(5.0, EventKind::kTaskComplete, 1));
  ASSERT_OK(q.Push(1.0, EventKind::kTaskComplete, 2));
  ASSERT_OK(q.Push(5.0, EventKind::kAvailabilityChange, 3));
  ASSERT_OK(q.Push(1.0, EventKind::kRoundDeadline, 4));
  ASSERT_OK(q.Push(5.0, EventKind::kTaskFail, 5));
  ASSERT_OK(q.Push(0.5, EventKind::kRoundStart, 6));
  std::vector<int> order;
  while (!q.empty()) order.push_back(q.Pop().client);
  EXPECT_EQ(order, (std::vector<int>{6, 2, 4, 1, 3, 5}));
  EXPECT_DOUBLE_EQ(q.now(), 5.0);
}

TEST(EventQueueTest, ManyTiesKeepInsertionOrder) {
  EventQueue q;
  for (int i = 0; i < 1000; ++i) ASSERT_OK(q.Push(i % 3, EventKind::kTaskComplete, i));
  int last_time = -1, last_client = -1;
  while (!q.empty()) {
    Event e = q.Pop();
    if (static_cast<int>(e.time_s) == last_time) {
      EXPECT_GT(e.client, last_client);
    }
    EXPECT_GE(static_cast<int>(e.time_s), last_time);
    last_time = static_cast<int>(e.time_s);
    last_client = e.client;
  }
}

TEST(EventQueueTest, RefusesThePast) {
  EventQueue q;
  ASSERT_OK(q.Push(10, EventKind::kTaskComplete));
  q.Pop();
  EXPECT_THAT(q.Push(9.99, EventKind::kTaskComplete),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("before")));
  EXPECT_OK(q.Push(10, EventKind::kTaskComplete));  // same instant is fine
  EXPECT_FALSE(q.Push(std::nan(""), EventKind::kTaskComplete).ok());
}

}  // namespace
}  // namespace fedsched::sim

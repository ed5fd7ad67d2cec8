// fedsched-client --slowdown's emulated device (client/slow_device_trainer.h), on a fake clock and
// a fake CPU clock: the wait it adds is exactly factor x CPU seconds + read seconds - what the
// training took.
#include "client/slow_device_trainer.h"

#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/sdk/fake_client_clock.h"

namespace fedsched {
namespace {

using ::fedsched::testing::FakeClientClock;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Samples whose every read takes 10 ms on `clock`.
class SlowSource : public SampleSource {
 public:
  explicit SlowSource(FakeClientClock* clock) : clock_(clock) {}
  int64_t NumSamples() const override { return 5; }
  absl::StatusOr<std::string_view> Read(int64_t id) override {
    clock_->Advance(absl::Milliseconds(10));
    return std::string_view("x", 1);
  }

 private:
  FakeClientClock* const clock_;
};

// Reads every planned sample, then computes for `cpu_s` CPU seconds that take `wall_s` on the
// clock (more than cpu_s: the machine is shared). Fails when `fail` is set.
class FakeTrainer : public Trainer {
 public:
  FakeTrainer(FakeClientClock* clock, double* cpu, double cpu_s, double wall_s)
      : clock_(clock), cpu_(cpu), cpu_s_(cpu_s), wall_s_(wall_s) {}
  absl::StatusOr<TrainResult> Train(const TrainRequest& request, SampleSource& samples) override {
    for (int64_t id : request.sample_ids) {
      if (absl::StatusOr<std::string_view> s = samples.Read(id); !s.ok()) return s.status();
    }
    *cpu_ += cpu_s_;
    clock_->Advance(absl::Seconds(wall_s_));
    if (fail) return absl::DataLossError("storage failed");
    TrainResult result;
    result.num_examples = static_cast<int64_t>(request.sample_ids.size());
    return result;
  }
  int64_t PeakMemoryBytes(const TrainRequest&) const override { return 1234; }
  bool fail = false;

 private:
  FakeClientClock* const clock_;
  double* const cpu_;
  const double cpu_s_;
  const double wall_s_;
};

struct Fixture {
  Fixture(double factor, double cpu_s, double wall_s)
      : clock(absl::FromUnixSeconds(1'000), /*auto_advance=*/true), source(&clock) {
    auto inner = std::make_unique<FakeTrainer>(&clock, &cpu, cpu_s, wall_s);
    fake = inner.get();
    absl::StatusOr<std::unique_ptr<SlowDeviceTrainer>> made = SlowDeviceTrainer::Create(
        std::move(inner),
        {.factor = factor, .clock = &clock, .thread_cpu_seconds = [this] { return cpu; }});
    EXPECT_TRUE(made.ok()) << made.status();
    trainer = *std::move(made);
    request.sample_ids = {0, 1, 2, 3, 4};
  }
  FakeClientClock clock;
  SlowSource source;
  double cpu = 100.0;
  FakeTrainer* fake = nullptr;
  std::unique_ptr<SlowDeviceTrainer> trainer;
  TrainRequest request;
};

TEST(SlowDeviceTrainerTest, StretchesCpuTimeByTheFactorAndKeepsReadTime) {
  // 0.5 CPU s x 4 + 5 reads of 10 ms = 2.05 s; training took 1 s + 0.05 s: waits 1 s more.
  Fixture f(/*factor=*/4.0, /*cpu_s=*/0.5, /*wall_s=*/1.0);
  const absl::Time start = f.clock.Now();
  absl::StatusOr<TrainResult> result = f.trainer->Train(f.request, f.source);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->num_examples, 5);
  ASSERT_EQ(f.clock.sleeps().size(), 1u);
  EXPECT_NEAR(absl::ToDoubleSeconds(f.clock.sleeps()[0]), 1.0, 1e-9);
  EXPECT_NEAR(absl::ToDoubleSeconds(f.clock.Now() - start), 2.05, 1e-9);
}

TEST(SlowDeviceTrainerTest, NoWaitWhenTrainingAlreadyTookLonger) {
  // A loaded machine: 0.2 CPU s x 3 = 0.6 s + 0.05 s, but training took 2 s of wall time.
  Fixture f(/*factor=*/3.0, /*cpu_s=*/0.2, /*wall_s=*/2.0);
  ASSERT_TRUE(f.trainer->Train(f.request, f.source).ok());
  EXPECT_TRUE(f.clock.sleeps().empty());
}

TEST(SlowDeviceTrainerTest, FactorOneAndFailuresPassThrough) {
  Fixture one(/*factor=*/1.0, /*cpu_s=*/0.5, /*wall_s=*/0.5);
  ASSERT_TRUE(one.trainer->Train(one.request, one.source).ok());
  EXPECT_TRUE(one.clock.sleeps().empty());

  Fixture failing(/*factor=*/10.0, /*cpu_s=*/0.5, /*wall_s=*/0.5);
  failing.fake->fail = true;
  absl::StatusOr<TrainResult> result = failing.trainer->Train(failing.request, failing.source);
  EXPECT_TRUE(absl::IsDataLoss(result.status())) << result.status();
  EXPECT_TRUE(failing.clock.sleeps().empty());
  EXPECT_EQ(failing.trainer->PeakMemoryBytes(failing.request), 1234);
  EXPECT_TRUE(absl::IsUnimplemented(failing.trainer->Evaluate(v1::Model()).status()));
}

TEST(SlowDeviceTrainerTest, RefusesFactorsBelowOne) {
  for (double factor : {0.5, 0.0, -1.0, std::nan("")}) {
    FakeClientClock clock;
    double cpu = 0;
    SlowDeviceOptions options;
    options.factor = factor;
    absl::StatusOr<std::unique_ptr<SlowDeviceTrainer>> made =
        SlowDeviceTrainer::Create(std::make_unique<FakeTrainer>(&clock, &cpu, 0.0, 0.0), options);
    ASSERT_TRUE(absl::IsInvalidArgument(made.status())) << factor;
    EXPECT_THAT(std::string(made.status().message()), HasSubstr("slowdown_factor must be >= 1"));
  }
  EXPECT_TRUE(absl::IsInvalidArgument(SlowDeviceTrainer::Create(nullptr, {}).status()));
}

}  // namespace
}  // namespace fedsched

// The simulator with secure aggregation (docs/guides/SIMULATION.md "Secure aggregation"): the
// simulated devices run the protocol through the round engine; the committed model is the plain
// run's FedAvg within the quantisation bound; the protocol's round trips and bytes are charged to
// the virtual clock and counted in the CSV; devices that go offline between their masked input and
// the unmask step (a scripted availability trace) are survived down to the threshold, below
// which the round fails with the model unchanged.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/engine/modelled_learner.h"
#include "sim/engine/output.h"
#include "sim/engine/setup.h"
#include "tests/sim/engine/scripted_parts.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;
using namespace ::fedsched::sim::testing;  // NOLINT: the scripted parts

constexpr int64_t kModelBytes = 125'000;  // the modelled model: 31,250 parameters

// `n` clients, K = n, everyone in the round (overcommit 1), first-K closing; clip 10 (no scripted
// delta is clipped), secure aggregation on or off.
v1::SimConfig Config(int32_t n, int32_t rounds, bool secagg) {
  v1::SimConfig c = HandConfig(n, n, 1.0, rounds);
  c.set_round_trip_s(0.5);
  c.mutable_server()->mutable_aggregation()->set_clip_update_norm(10);
  c.mutable_server()->mutable_secure_aggregation()->set_enabled(secagg);
  return c;
}

struct Outcome {
  Collect out;
  RunSummary summary;
};

Outcome RunSim(const v1::SimConfig& config, const CapacityTrace& cap, const AvailabilityTrace& av,
               Learner& learner, TaskDurations* durations = nullptr) {
  Outcome run;
  SimulatorParts parts;
  absl::StatusOr<v1::SimConfig> resolved = ResolveSimConfig(config);
  EXPECT_OK(resolved.status());
  if (!resolved.ok()) return run;
  parts.config = *resolved;
  parts.capacity = &cap;
  parts.availability = &av;
  parts.learner = &learner;
  parts.durations = durations;
  absl::StatusOr<std::unique_ptr<Simulator>> sim = Simulator::Create(std::move(parts));
  EXPECT_OK(sim.status());
  if (!sim.ok()) return run;
  absl::StatusOr<RunSummary> summary = (*sim)->Run(&run.out);
  EXPECT_OK(summary.status());
  if (summary.ok()) run.summary = *summary;
  return run;
}

// The same scripted run of `n` clients (always online, ThreeDevices' capacities) without and
// with secure aggregation.
struct PlainAndSecure {
  Outcome plain;
  Outcome secure;
};
PlainAndSecure RunBoth(int32_t n, int32_t rounds) {
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner plain_learner(n, 20, kModelBytes);
  ScriptedLearner secure_learner(n, 20, kModelBytes);
  PlainAndSecure both{RunSim(Config(n, rounds, false), cap, av, plain_learner),
                      RunSim(Config(n, rounds, true), cap, av, secure_learner)};
  EXPECT_EQ(both.plain.out.rows.size(), static_cast<size_t>(rounds));
  EXPECT_EQ(both.secure.out.rows.size(), static_cast<size_t>(rounds));
  return both;
}

// The serialized SecAggMaskedInput of the modelled model for cohort member `sender` of round 1:
// round_id (2 bytes), sender (2 bytes, none for 0), packed data (1 + 3 + 4 x 31,250 bytes).
int64_t MaskedBytes(uint32_t sender) { return 2 + (sender > 0 ? 2 : 0) + 1 + 3 + 125'000; }

TEST(SimulatorSecAggTest, CommitsTheSameFedAvgAsWithoutAndChargesTheProtocol) {
  const auto [plain, secure] = RunBoth(4, 2);
  ASSERT_EQ(secure.out.rows.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE(r);
    const RoundRow& row = secure.out.rows[r];
    ASSERT_TRUE(row.committed);
    EXPECT_EQ(row.participants, 4);
    // FedAvg of the deltas 1, 2, 3, 4 (equal examples) each round: 2.5, then 5; the unmasked
    // sum is within secagg::ErrorBound (about 1e-7 here) of the plain one.
    EXPECT_NEAR(secure.out.models[r], plain.out.models[r], 1e-5);
    EXPECT_NEAR(secure.out.models[r], 2.5f * static_cast<float>(r + 1), 1e-5);
    // Three round trips per device, every unmask answer, and the masked uploads charged as
    // 4 bytes per parameter of the modelled model plus framing.
    EXPECT_EQ(row.secagg.round_trips, 12);
    EXPECT_EQ(row.secagg.unmask_answers, 4);
    EXPECT_GT(row.secagg.bytes_up, 0);
    EXPECT_GT(row.secagg.bytes_down, 0);
    EXPECT_EQ(row.secagg.masked_bytes,
              MaskedBytes(0) + MaskedBytes(1) + MaskedBytes(2) + MaskedBytes(3));
    EXPECT_EQ(plain.out.rows[r].secagg.round_trips, 0);
    EXPECT_EQ(plain.out.rows[r].secagg.bytes_up, 0);
  }
  // The CSV has the secure-aggregation columns, in a row, then the link's bytes.
  const std::vector<std::string> header = absl::StrSplit(RoundCsvHeader(), ',');
  const std::vector<std::string> cells = absl::StrSplit(RoundCsvLine("x", secure.out.rows[0]), ',');
  ASSERT_EQ(cells.size(), header.size());
  const size_t up = static_cast<size_t>(std::find(header.begin(), header.end(), "secagg_bytes_up") -
                                        header.begin());
  ASSERT_LT(up + 5, header.size());
  EXPECT_EQ(header[up + 3], "secagg_round_trips");
  EXPECT_EQ(header[up + 4], "secagg_unmask_answers");
  EXPECT_EQ(header[up + 5], "uplink_bytes");
  EXPECT_EQ(cells[up + 3], "12");
  EXPECT_EQ(cells[up + 4], "4");
}

// The devices sign their advertisements with keys seeded from the run's seed, as the SDK signs
// with its state dir's key: two runs of one config give the same rows, bytes and model, and the
// advertisements are charged with their signatures (above 3 x 32 + 64 bytes each).
TEST(SimulatorSecAggTest, SignedAdvertisementsKeepRunsReproducible) {
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner first_learner(4, 20, kModelBytes);
  ScriptedLearner second_learner(4, 20, kModelBytes);
  const Outcome first = RunSim(Config(4, 2, true), cap, av, first_learner);
  const Outcome second = RunSim(Config(4, 2, true), cap, av, second_learner);
  ASSERT_EQ(first.out.rows.size(), 2u);
  ASSERT_EQ(second.out.rows.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(first.out.rows[r].committed);
    EXPECT_EQ(RoundCsvLine("x", first.out.rows[r]), RoundCsvLine("x", second.out.rows[r]));
    EXPECT_EQ(first.out.models[r], second.out.models[r]);
    EXPECT_GT(first.out.rows[r].secagg.bytes_up, 4 * (3 * 32 + 64));
  }
}

// Sixteen bits per element (docs/guides/SECURE_AGGREGATION.md "Bits per element"): the rounds
// commit the 32-bit run's FedAvg within the 16-bit bound (n / s = 4 / 819 per coordinate of the
// sum, a quarter of it in the average), the masked uploads are charged at 2 bytes a parameter
// (half the 32-bit run's data bytes), and every round ends sooner by the upload time saved.
TEST(SimulatorSecAggTest, SixteenBitsHalveTheMaskedUploadsAndCommitTheSameFedAvg) {
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner full_learner(4, 20, kModelBytes);
  ScriptedLearner half_learner(4, 20, kModelBytes);
  v1::SimConfig half = Config(4, 2, true);
  half.mutable_server()->mutable_secure_aggregation()->set_bits_per_element(16);
  const Outcome full = RunSim(Config(4, 2, true), cap, av, full_learner);
  const Outcome packed = RunSim(half, cap, av, half_learner);
  ASSERT_EQ(full.out.rows.size(), 2u);
  ASSERT_EQ(packed.out.rows.size(), 2u);
  // round_id, sender (none for 0), tag, length varint (3 bytes) and 2 x 31,250 data bytes.
  auto packed_bytes = [](uint32_t sender) { return 2 + (sender > 0 ? 2 : 0) + 1 + 3 + 62'500; };
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE(r);
    const RoundRow& row = packed.out.rows[r];
    ASSERT_TRUE(row.committed);
    EXPECT_EQ(row.participants, 4);
    EXPECT_NEAR(packed.out.models[r], 2.5f * static_cast<float>(r + 1), 5e-3);
    EXPECT_NEAR(packed.out.models[r], full.out.models[r], 5e-3);
    EXPECT_EQ(row.secagg.masked_bytes,
              packed_bytes(0) + packed_bytes(1) + packed_bytes(2) + packed_bytes(3));
    EXPECT_EQ(full.out.rows[r].secagg.masked_bytes - 4 * 6 - 3 * 2,
              2 * (row.secagg.masked_bytes - 4 * 6 - 3 * 2));
    EXPECT_LT(row.end_s - row.start_s, full.out.rows[r].end_s - full.out.rows[r].start_s - 1.0);
  }
}

TEST(SimulatorSecAggTest, RoundsTakeLongerByTheProtocolsRoundTrips) {
  // Capacity durations (client 2 is the slowest, 20.05 s); the secure round adds three round
  // trips of 0.5 s (advertise, share keys, unmask) plus the messages' transfers (well under
  // 0.1 s at 250 kbit/s) and the masked upload's few bytes more than the model's.
  const auto [plain, secure] = RunBoth(3, 3);
  ASSERT_EQ(plain.out.rows.size(), 3u);
  ASSERT_EQ(secure.out.rows.size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    SCOPED_TRACE(r);
    const RoundRow& p = plain.out.rows[r];
    const RoundRow& s = secure.out.rows[r];
    ASSERT_TRUE(s.committed);
    const double extra = (s.end_s - s.start_s) - (p.end_s - p.start_s);
    EXPECT_GE(extra, 3 * 0.5);
    EXPECT_LT(extra, 3 * 0.5 + 0.1);
  }
  EXPECT_GT(secure.summary.virtual_s, plain.summary.virtual_s + 3 * 3 * 0.5);
}

// PyramidFL update dropout in the simulator (docs/ALGORITHMS.md §10) shares this file's scripted
// run: with every participant dropping half of its update, each round's slowest upload is
// charged half, so every round is shorter; the modelled model (a stand-in) drops the expected
// share.
TEST(SimulatorUpdateDropoutTest, DroppedTensorsShortenTheUploads) {
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ScriptedLearner plain_learner(3, 20, kModelBytes);
  ScriptedLearner thin_learner(3, 20, kModelBytes);
  v1::SimConfig thin = Config(3, 2, false);
  v1::WorkloadExtensionConfig* ext =
      thin.mutable_server()->mutable_selection()->mutable_extend_workload();
  ext->set_dropout_low(0.5);
  ext->set_dropout_high(0.5);
  const Outcome plain = RunSim(Config(3, 2, false), cap, av, plain_learner);
  const Outcome dropped = RunSim(thin, cap, av, thin_learner);
  ASSERT_EQ(plain.out.rows.size(), 2u);
  ASSERT_EQ(dropped.out.rows.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE(r);
    const double p = plain.out.rows[r].end_s - plain.out.rows[r].start_s;
    const double d = dropped.out.rows[r].end_s - dropped.out.rows[r].start_s;
    EXPECT_TRUE(dropped.out.rows[r].committed);
    EXPECT_GT(p - d, 0.1);    // half an upload of 125 kB saved
    EXPECT_LT(p - d, p / 2);  // never more than the upload itself
  }
}

// Five clients, K = 5 (the complete graph, k = 4, t = 3); clients 0..3 train 5 s, client 4 30 s,
// so the unmask step opens about 30 s in; the clients in `leave` go offline at t = 20, after
// their masked input and before the unmask request, and are back at t = 100.
Outcome RunWithUnmaskDropouts(const std::vector<int32_t>& leave, ScriptedLearner& learner) {
  CapacityTrace cap = ThreeDevices();
  std::vector<std::vector<std::pair<double, double>>> windows(5, {{0, 10'000}});
  for (int32_t c : leave) windows[c] = {{0, 20}, {100, 10'000}};
  AvailabilityTrace av = Windows(windows, 10'000);
  ScriptedDurations durations;
  for (int32_t c = 0; c < 4; ++c) durations.by_client[c] = 5;
  durations.by_client[4] = 30;
  v1::SimConfig config = Config(5, 1, true);
  config.mutable_server()->set_min_online_clients(3);  // no round with fewer than t online
  return RunSim(config, cap, av, learner, &durations);
}

TEST(SimulatorSecAggTest, DropoutsBeforeUnmaskingAreSurvivedDownToTheThreshold) {
  ScriptedLearner learner(5, 20, kModelBytes);
  const Outcome run = RunWithUnmaskDropouts({0, 1}, learner);
  ASSERT_EQ(run.out.rows.size(), 1u);
  const RoundRow& row = run.out.rows[0];
  ASSERT_TRUE(row.committed);
  // All five masked inputs are in the sum: the three survivors' shares unmask the two that
  // left. FedAvg of 1..5 = 3.
  EXPECT_EQ(row.participants, 5);
  EXPECT_NEAR(run.out.models[0], 3.0f, 1e-5);
  EXPECT_EQ(row.secagg.unmask_answers, 3);
  EXPECT_EQ(row.secagg.round_trips, 5 + 5 + 3);
  // The unmask step waits for the silent two until its deadline (step_timeout_s: 10 % of the
  // 120 s round deadline) after it opened (client 4's upload, about 31 s in).
  EXPECT_GT(row.end_s, 30 + 12);
  EXPECT_LT(row.end_s, 30 + 12 + 2);
}

TEST(SimulatorSecAggTest, FewerThanThresholdAtUnmaskingFailsTheRoundModelUnchanged) {
  ScriptedLearner learner(5, 20, kModelBytes);
  const Outcome run = RunWithUnmaskDropouts({0, 1, 3}, learner);
  // The first attempt fails (2 of t = 3 answer); once the three are back (t = 100) the round is
  // planned again, from the unchanged model, and commits.
  ASSERT_EQ(run.out.rows.size(), 2u);
  EXPECT_FALSE(run.out.rows[0].committed);
  // Every masked input arrived; the unmasking failed.
  EXPECT_EQ(run.out.rows[0].participants, 5);
  EXPECT_EQ(run.out.rows[0].secagg.unmask_answers, 2);
  EXPECT_EQ(run.out.models[0], -1.0f);  // nothing committed
  ASSERT_TRUE(run.out.rows[1].committed);
  EXPECT_GE(run.out.rows[1].start_s, 100);
  EXPECT_NEAR(run.out.models[1], 3.0f, 1e-5);  // 0 + FedAvg of 1..5
  EXPECT_EQ(run.summary.rounds_failed, 1);
  EXPECT_EQ(run.summary.rounds_committed, 1);
}

TEST(SimulatorSecAggTest, NoTrainModeMasksTheOneFloatModelAndChargesTheModelledSize) {
  // The modelled learner's model is one float and its deltas 0: each device masks a zero vector
  // of that length, and its upload is charged as a masked input of model_bytes / 4 parameters.
  v1::SimConfig c;
  c.set_num_clients(30);
  c.set_no_train(true);
  c.set_quiet(true);
  c.set_model_bytes(40'000);
  c.mutable_traces()->set_capacity_path("unused");
  v1::ServerConfig* s = c.mutable_server();
  s->set_clients_per_round(6);
  s->set_num_rounds(3);
  s->mutable_aggregation()->set_clip_update_norm(1);
  s->mutable_secure_aggregation()->set_enabled(true);
  CapacityTrace cap = ThreeDevices();
  AvailabilityTrace av = AvailabilityTrace::AlwaysOn();
  ASSERT_OK_AND_ASSIGN(v1::SimConfig resolved, ResolveSimConfig(c));
  ModelledLearner::Options lo;
  lo.curve = resolved.curve();
  lo.num_clients = 30;
  lo.clients_per_round = 6;
  lo.model_bytes = 40'000;
  ModelledLearner learner(lo);
  const Outcome run = RunSim(c, cap, av, learner);
  EXPECT_EQ(run.summary.rounds_committed, 3);
  for (const RoundRow& row : run.out.rows) {
    EXPECT_TRUE(row.committed);
    EXPECT_GE(row.participants, 6);
    // 4 x 10,000 data bytes + framing per accepted or late masked input.
    EXPECT_GE(row.secagg.masked_bytes, row.participants * 40'000);
    EXPECT_LT(row.secagg.masked_bytes, row.selected * 40'020);
  }
}

TEST(SimulatorSecAggTest, RoundTripMustBeFiniteAndNonNegative) {
  v1::SimConfig c = Config(3, 1, true);
  ASSERT_OK_AND_ASSIGN(v1::SimConfig resolved, ResolveSimConfig(c));
  EXPECT_DOUBLE_EQ(resolved.round_trip_s(), 0.5);
  c.set_round_trip_s(0);
  ASSERT_OK_AND_ASSIGN(resolved, ResolveSimConfig(c));
  EXPECT_DOUBLE_EQ(resolved.round_trip_s(), kDefaultRoundTripS);
  c.set_round_trip_s(-1);
  EXPECT_THAT(ResolveSimConfig(c).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("round_trip_s")));
}

}  // namespace
}  // namespace fedsched::sim

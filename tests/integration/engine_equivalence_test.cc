// One round engine, two clocks (docs/ARCHITECTURE.md "Two clocks"): a scripted scenario —
// registrations, arrivals at given times, a drop-out, a straggler, deadline closes, a failed and
// re-planned round, FedBuff commits — replayed through the server's Coordinator (fake clock,
// in-memory store) and through the Simulator (virtual clock) gives the same round records and
// the same model bits.
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "server/service/coordinator.h"
#include "server/service/server_config.h"
#include "server/store/memory_store.h"
#include "sim/engine/setup.h"
#include "sim/engine/sim_client.h"
#include "sim/engine/simulator.h"
#include "tests/integration/scripted_learner.h"
#include "tests/server/service/provisioning.h"

namespace fedsched {
namespace {

constexpr int kClients = 6;
constexpr int32_t kBatch = 4;
constexpr int kModelSize = 8;        // floats of the scripted model
constexpr double kStep = 0.25;       // every scripted time is a multiple of this, seconds
constexpr double kHorizon = 400;     // seconds of the scenario
constexpr double kSampleKb = 0.784;  // per stored sample

// Seconds device `client` needs for its task of `round`: fast ones, a middling one, client 4
// which never makes a deadline (a straggler whenever it is picked), and client 2, which slows
// down from round 4 on (longer than the planner predicts from its history, so that its
// drop-out catches it mid-task). Distinct per client, so no two uploads land at the same
// instant.
double ScriptedSeconds(int32_t client, int64_t round) {
  static constexpr double kBase[kClients] = {3.0, 4.5, 6.0, 7.5, 45.0, 9.25};
  const double slow = client == 2 && round >= 4 ? 12.0 : 0.0;
  return kBase[client] + slow + kStep * static_cast<double>(round % 3);
}

// Availability: everybody online all the time, except client 2, which drops out at 45 s (in the
// middle of whatever it does) and returns at 120 s, and clients 0, 1 and 3, which leave from
// 30 s to 100 s, so that the round planned just before 30 s cannot reach min_updates and fails.
sim::AvailabilityTrace ScriptedAvailability() {
  std::vector<sim::AvailabilityRowSpec> rows(kClients);
  for (int c = 0; c < kClients; ++c) {
    rows[c].trace_id = c;
    rows[c].finish_time_s = 100000;
    rows[c].windows = {{0, 100000}};
  }
  rows[2].windows = {{0, 45}, {120, 100000}};
  for (int c : {0, 1, 3}) rows[c].windows = {{0, 30}, {100, 100000}};
  absl::StatusOr<sim::AvailabilityTrace> trace =
      sim::AvailabilityTrace::FromRows(std::move(rows), "scripted", /*synthetic=*/false);
  EXPECT_TRUE(trace.ok()) << trace.status();
  return *std::move(trace);
}

sim::TaskTiming ScriptedTiming(int32_t client, int64_t round) {
  sim::TaskTiming timing;
  const double total = ScriptedSeconds(client, round);
  timing.download_s = 0.25 * total;
  timing.compute_s = 0.5 * total;
  timing.upload_s = 0.25 * total;
  return timing;
}

class ScriptedDurations : public sim::TaskDurations {
 public:
  absl::StatusOr<sim::TaskTiming> Timing(const sim::TrainTask& task, const sim::TaskWork&,
                                         int64_t) override {
    return ScriptedTiming(task.client, task.round);
  }
};

// With `leaving_first`, the planner narrows its candidates first (docs/ALGORITHMS.md §2.7):
// with W = the deadline, clients 0, 1 and 3 (offline from 30 s) are leaving in the rounds planned
// before 10 s, and a client selected in the last two rounds comes last.
v1::ServerConfig ScenarioConfig(bool fedbuff, bool leaving_first = false,
                                bool stale_updates = false) {
  v1::ServerConfig c;
  c.set_clients_per_round(3);
  c.set_min_updates(2);
  c.set_min_online_clients(4);
  c.set_num_rounds(fedbuff ? 8 : 6);
  c.set_round_deadline_s(20);
  c.set_round_closing(v1::ROUND_CLOSING_FIRST_K);
  c.mutable_selection()->set_overcommit(1.5);  // 5 tasks for K = 3
  c.mutable_training()->set_local_steps(2);
  c.mutable_training()->set_batch_size(kBatch);
  c.mutable_aggregation()->set_async_fedbuff(fedbuff);
  if (leaving_first) {
    v1::LeavingFirstConfig* lf = c.mutable_selection()->mutable_leaving_first();
    lf->set_enable(true);
    lf->set_window_s(20);
    lf->set_cooldown_rounds(2);
  }
  c.mutable_aggregation()->mutable_stale_updates()->set_enable(stale_updates);
  c.set_seed(7);
  return c;
}

// One closed round as both sides report it.
struct Closed {
  v1::RoundRecord record;
  std::string model_sha256;  // of the committed model; empty for a failed round
};

class RecordingSink : public sim::RoundSink {
 public:
  void OnRound(const sim::RoundRow& row) override { dropped_tasks += row.failed; }
  void OnRecord(const v1::RoundRecord& record, const v1::Model* model) override {
    closed.push_back({record, model != nullptr ? Sha256(model->SerializeAsString()) : ""});
  }
  std::vector<Closed> closed;
  int dropped_tasks = 0;  // tasks whose device went offline mid-task
};

std::vector<Closed> RunSimulator(bool fedbuff, int* dropped_tasks = nullptr,
                                 bool leaving_first = false, bool stale_updates = false) {
  v1::SimConfig raw;
  raw.set_num_clients(kClients);
  *raw.mutable_server() = ScenarioConfig(fedbuff, leaving_first, stale_updates);
  raw.set_max_virtual_hours(kHorizon / 3600.0);
  raw.mutable_traces()->set_capacity_path("unused: durations are scripted");
  absl::StatusOr<v1::SimConfig> config = sim::ResolveSimConfig(raw);
  EXPECT_TRUE(config.ok()) << config.status();
  absl::StatusOr<sim::CapacityTrace> capacity =
      sim::CapacityTrace::FromRows({{.trace_id = 0,
                                     .computation_ms_per_sample = 5,
                                     .communication_kbps = 1000,
                                     .sample_kb = kSampleKb}},
                                   "scripted");
  EXPECT_TRUE(capacity.ok()) << capacity.status();
  sim::AvailabilityTrace availability = ScriptedAvailability();
  testing::ScriptedLearner learner(kModelSize, kBatch);
  ScriptedDurations durations;
  sim::SimulatorParts parts;
  parts.config = *config;
  parts.capacity = &*capacity;
  parts.availability = &availability;
  parts.learner = &learner;
  parts.durations = &durations;
  absl::StatusOr<std::unique_ptr<sim::Simulator>> simulator =
      sim::Simulator::Create(std::move(parts));
  EXPECT_TRUE(simulator.ok()) << simulator.status();
  RecordingSink sink;
  absl::StatusOr<sim::RunSummary> summary = (*simulator)->Run(&sink);
  EXPECT_TRUE(summary.ok()) << summary.status();
  if (dropped_tasks != nullptr) *dropped_tasks = sink.dropped_tasks;
  return sink.closed;
}

// The in-memory store, recording every round the coordinator persists (failed attempts too).
class RecordingStore : public MemoryStore {
 public:
  absl::Status CommitRound(RoundCommit commit) override {
    closed.push_back({commit.record, Sha256(commit.model->SerializeAsString())});
    return MemoryStore::CommitRound(std::move(commit));
  }
  absl::Status RecordFailedRound(const v1::RoundRecord& record) override {
    closed.push_back({record, ""});
    return MemoryStore::RecordFailedRound(record);
  }
  std::vector<Closed> closed;
};

// Drives the coordinator as the scripted devices would: at every kStep of fake time, devices
// that went offline report their task failed, online ones heartbeat, finished ones upload
// (in completion order), the server ticks, and idle online devices poll for tasks.
class ScriptedFleet {
 public:
  explicit ScriptedFleet(bool fedbuff, bool leaving_first = false, bool stale_updates = false)
      : availability_(ScriptedAvailability()), oracle_(&availability_, nullptr) {
    v1::ServerConfig raw = ScenarioConfig(fedbuff, leaving_first, stale_updates);
    raw.set_store_path("memory");
    raw.set_heartbeat_interval_ms(100);  // offline 0.1 s after the last heartbeat (< kStep)
    raw.set_missed_heartbeats(1);
    absl::StatusOr<v1::ServerConfig> config = ResolveServerConfig(raw);
    EXPECT_TRUE(config.ok()) << config.status();
    CoordinatorOptions options;
    options.config = *config;
    options.store = &store_;
    options.initial_model = testing::InitialModel(kModelSize);
    options.clock = [this] { return At(now_); };
    options.deterministic_task_ids = true;
    options.enrolment_key = testing::kTestEnrolmentKey;
    // The planner gets the same availability forecast as in the simulator (engine index k is
    // simulated client k: both register in client order).
    options.availability = &oracle_;
    absl::StatusOr<std::unique_ptr<Coordinator>> coordinator =
        Coordinator::Create(std::move(options));
    EXPECT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = *std::move(coordinator);
    model_bytes_ = static_cast<int64_t>(testing::InitialModel(kModelSize).ByteSizeLong());
  }

  std::vector<Closed> Run() {
    for (int32_t c = 0; c < kClients; ++c) Register(c);
    for (now_ = 0; now_ <= kHorizon && !coordinator_->finished(); now_ += kStep) Step();
    return store_.closed;
  }

 private:
  // A task a device works on until it completes or the device goes offline first. A device
  // whose task became a straggler is free for new tasks at once (its late upload is refused, or
  // under stale_updates folded late),
  // as in the simulator.
  struct Pending {
    v1::Task task;
    double done_at = 0;   // completes at (when it does not go offline first)
    double fails_at = 0;  // goes offline before completing at (0 = does not)
    int64_t serial = 0;   // order in which the fleet took its tasks
  };
  struct Device {
    v1::RegisterResponse session;
    std::map<std::string, Pending> tasks;  // by task id
  };

  static absl::Time At(double s) { return absl::UnixEpoch() + absl::Seconds(s); }

  void Register(int32_t c) {
    v1::RegisterRequest request;
    request.set_identity(sim::SimIdentity(c));
    *request.mutable_device() = sim::SimDeviceProfile({.client = c,
                                                       .model = "",
                                                       .compute_ms_per_sample = 5,
                                                       .num_samples = 100,
                                                       .sample_kb = kSampleKb});
    absl::StatusOr<v1::RegisterResponse> r =
        coordinator_->Register(testing::Provisioned(request), At(0));
    ASSERT_TRUE(r.ok()) << r.status();
    devices_[c].session = *r;
  }

  void Step() {
    for (auto& [c, d] : devices_) {
      for (auto it = d.tasks.begin(); it != d.tasks.end();) {
        if (it->second.fails_at > 0 && it->second.fails_at == now_) {
          v1::ReportFailureRequest request;
          request.set_client_id(d.session.client_id());
          request.set_session_token(d.session.session_token());
          request.set_task_id(it->first);
          request.set_reason("device went offline");
          // NOT_FOUND for a task whose round closed already, as the engine answers the sim.
          (void)coordinator_->ReportFailure(request, At(now_));
          it = d.tasks.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& [c, d] : devices_) {
      if (!availability_.IsAvailable(c, now_)) continue;
      v1::HeartbeatRequest request;
      request.set_client_id(d.session.client_id());
      request.set_session_token(d.session.session_token());
      EXPECT_OK(coordinator_->Heartbeat(request, At(now_)).status());
    }
    // Completions in the order the tasks were taken (the simulator's event order at one
    // instant).
    std::map<int64_t, std::pair<int32_t, std::string>> done;
    for (auto& [c, d] : devices_) {
      for (auto& [id, p] : d.tasks) {
        if (p.fails_at == 0 && p.done_at == now_) done[p.serial] = {c, id};
      }
    }
    for (const auto& [serial, task] : done) Upload(task.first, devices_[task.first], task.second);
    coordinator_->Tick(At(now_));
    for (auto& [c, d] : devices_) {
      if (availability_.IsAvailable(c, now_)) Poll(c, d);
    }
  }

  void Poll(int32_t c, Device& d) {
    v1::PollTaskRequest request;
    request.set_client_id(d.session.client_id());
    request.set_session_token(d.session.session_token());
    absl::StatusOr<v1::PollTaskResponse> r = coordinator_->PollTask(request, At(now_));
    ASSERT_TRUE(r.ok()) << r.status();
    if (!r->has_task() || d.tasks.contains(r->task().task_id()) ||
        seen_.contains(r->task().task_id())) {
      return;
    }
    seen_.insert(r->task().task_id());
    Pending p;
    p.task = r->task();
    p.serial = static_cast<int64_t>(seen_.size());
    p.done_at = now_ + ScriptedTiming(c, p.task.round()).total_s();
    const double offline = availability_.NextChange(c, now_);
    p.fails_at = offline < p.done_at ? offline : 0;
    d.tasks[p.task.task_id()] = std::move(p);
  }

  void Upload(int32_t c, Device& d, const std::string& task_id) {
    const v1::Task task = d.tasks.at(task_id).task;
    d.tasks.erase(task_id);
    const sim::TaskWork work = testing::ScriptedWork(c, task.round(), task.local_steps(), kBatch);
    const sim::TaskTiming timing = ScriptedTiming(c, task.round());
    const std::string payload =
        testing::ScriptedDelta(c, task.round(), kModelSize).SerializeAsString();
    v1::UploadHeader header;
    header.set_client_id(d.session.client_id());
    header.set_session_token(d.session.session_token());
    header.set_task_id(task.task_id());
    header.set_round(task.round());
    header.set_total_bytes(static_cast<int64_t>(payload.size()));
    header.set_sha256(Sha256(payload));
    header.set_num_chunks(1);
    *header.mutable_metrics() = sim::SimUpdateMetrics(work, timing, model_bytes_);
    // Stragglers upload too (and are refused), as the simulator's devices do.
    (void)coordinator_->SubmitUpdate(header, payload, At(now_), timing.upload_s);
  }

  sim::AvailabilityTrace availability_;
  sim::TraceAvailabilityOracle oracle_;
  RecordingStore store_;
  std::unique_ptr<Coordinator> coordinator_;
  std::map<int32_t, Device> devices_;
  std::set<std::string> seen_;  // task ids already taken
  int64_t model_bytes_ = 0;
  double now_ = 0;
};

std::string Summary(const std::vector<Closed>& closed) {
  std::string out;
  for (const Closed& c : closed) {
    absl::StrAppend(&out, "  round ", c.record.round(), " ",
                    v1::RoundOutcome_Name(c.record.outcome()), " [", c.record.start_unix_ms(), ", ",
                    c.record.end_unix_ms(), "] ms, accepted ", c.record.updates_accepted(),
                    ", rejected ", c.record.updates_rejected(), ", stragglers ",
                    c.record.stragglers_size(), ", cohort");
    for (const v1::SelectionReason& r : c.record.cohort()) {
      absl::StrAppend(&out, " ", r.client_id(), "(", r.predicted_seconds(), " s)");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

void ExpectSame(const std::vector<Closed>& server, const std::vector<Closed>& simulated) {
  ASSERT_EQ(server.size(), simulated.size()) << "server:\n"
                                             << Summary(server) << "simulator:\n"
                                             << Summary(simulated);
  for (size_t i = 0; i < server.size(); ++i) {
    std::string diff;
    google::protobuf::util::MessageDifferencer differ;
    differ.ReportDifferencesToString(&diff);
    EXPECT_TRUE(differ.Compare(server[i].record, simulated[i].record))
        << "round record " << i << " (round " << server[i].record.round() << ") differs:\n"
        << diff;
    EXPECT_EQ(ToHex(server[i].model_sha256), ToHex(simulated[i].model_sha256))
        << "model bits of round " << server[i].record.round();
  }
}

TEST(EngineEquivalenceTest, SynchronousRoundsMatchBitForBit) {
  int dropped = 0;
  const std::vector<Closed> simulated = RunSimulator(/*fedbuff=*/false, &dropped);
  const std::vector<Closed> server = ScriptedFleet(/*fedbuff=*/false).Run();
  ExpectSame(server, simulated);
  EXPECT_GE(dropped, 1) << Summary(server);
  // The scenario has what it claims: commits, a failed round, stragglers, a drop-out.
  int committed = 0, failed = 0, stragglers = 0;
  for (const Closed& c : server) {
    if (c.record.outcome() == v1::ROUND_OUTCOME_COMMITTED) ++committed;
    if (c.record.outcome() == v1::ROUND_OUTCOME_FAILED) ++failed;
    stragglers += c.record.stragglers_size();
  }
  EXPECT_EQ(committed, 6);
  EXPECT_GE(failed, 1) << Summary(server);
  EXPECT_GE(stragglers, 1);
}

// The participants of every round, in record order.
std::vector<std::string> Cohorts(const std::vector<Closed>& closed) {
  std::vector<std::string> cohorts;
  for (const Closed& c : closed) {
    std::string ids;
    for (const v1::SelectionReason& p : c.record.cohort())
      absl::StrAppend(&ids, p.client_id(), " ");
    cohorts.push_back(ids);
  }
  return cohorts;
}

TEST(EngineEquivalenceTest, LeavingFirstPlansMatchBitForBit) {
  const std::vector<Closed> simulated =
      RunSimulator(/*fedbuff=*/false, /*dropped_tasks=*/nullptr, /*leaving_first=*/true);
  const std::vector<Closed> server = ScriptedFleet(/*fedbuff=*/false, /*leaving_first=*/true).Run();
  ExpectSame(server, simulated);
  // The narrowing acted: the cohorts differ from those of the same scenario without it.
  EXPECT_NE(Cohorts(server), Cohorts(ScriptedFleet(/*fedbuff=*/false).Run()));
}

// Staleness-aware aggregation (docs/ALGORITHMS.md §6.3): stragglers' late uploads are folded in
// later rounds on both sides, with the same weights.
TEST(EngineEquivalenceTest, StaleUpdatesMatchBitForBit) {
  const std::vector<Closed> simulated = RunSimulator(/*fedbuff=*/false, /*dropped_tasks=*/nullptr,
                                                     /*leaving_first=*/false,
                                                     /*stale_updates=*/true);
  const std::vector<Closed> server =
      ScriptedFleet(/*fedbuff=*/false, /*leaving_first=*/false, /*stale_updates=*/true).Run();
  ExpectSame(server, simulated);
  int folded = 0;
  for (const Closed& c : server) folded += c.record.stale_updates_folded();
  EXPECT_GT(folded, 0);
}

TEST(EngineEquivalenceTest, FedBuffVersionsMatchBitForBit) {
  const std::vector<Closed> simulated = RunSimulator(/*fedbuff=*/true);
  const std::vector<Closed> server = ScriptedFleet(/*fedbuff=*/true).Run();
  ExpectSame(server, simulated);
  int committed = 0;
  for (const Closed& c : server) committed += c.record.outcome() == v1::ROUND_OUTCOME_COMMITTED;
  EXPECT_EQ(committed, 8);
}

}  // namespace
}  // namespace fedsched

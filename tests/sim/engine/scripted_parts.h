// Scripted simulator parts for tests: a Learner whose deltas and work are fixed per client,
// task durations fixed per task id (or client), small traces, and a sink that keeps every row
// and record. With them a scenario is computed by hand (or replayed through the server's
// coordinator) and compared with what the simulator does through the round engine.
#ifndef FEDSCHED_TESTS_SIM_ENGINE_SCRIPTED_PARTS_H_
#define FEDSCHED_TESTS_SIM_ENGINE_SCRIPTED_PARTS_H_

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/engine/device_model.h"
#include "sim/engine/learner.h"
#include "sim/engine/output.h"
#include "sim/engine/setup.h"
#include "sim/engine/simulator.h"
#include "sim/trace/availability_trace.h"
#include "sim/trace/capacity_trace.h"

namespace fedsched::sim::testing {

// A one-tensor model ("w", shape [1]) holding `value`.
inline v1::Model OneFloatModel(float value) {
  v1::Model m;
  v1::Tensor* t = m.add_tensors();
  t->set_name("w");
  t->add_shape(1);
  t->add_data(value);
  return m;
}

// Every task trains local_steps x batch examples, half of the reads hit the cache; client c's
// delta is delta_of[c] (default c + 1), whatever the global model. Records what it is asked.
class ScriptedLearner : public Learner {
 public:
  ScriptedLearner(int32_t num_clients, int32_t batch_size, int64_t model_bytes)
      : samples_(num_clients, 100),
        batch_(batch_size),
        model_bytes_(model_bytes),
        initial_(OneFloatModel(0)) {}

  const v1::Model& initial_model() const override { return initial_; }
  int64_t ModelBytes() const override { return model_bytes_; }
  int64_t NumSamples(int32_t client) const override { return samples_[client]; }
  absl::StatusOr<std::vector<TrainedTask>> Train(absl::Span<const TrainTask> tasks,
                                                 const v1::Model& global) override {
    std::vector<TrainedTask> out;
    for (const TrainTask& t : tasks) {
      trained.push_back(t);
      TrainedTask r;
      r.work.examples = static_cast<int64_t>(t.local_steps) * batch_;
      r.work.cache_hits = r.work.examples / 2;
      r.work.cache_misses = r.work.examples - r.work.cache_hits;
      r.work.mean_loss = 1.0;
      r.work.statistical_utility = static_cast<double>(r.work.examples);
      auto it = delta_of.find(t.client);
      r.delta = std::make_shared<v1::Model>(
          OneFloatModel(it != delta_of.end() ? it->second : static_cast<float>(t.client + 1)));
      out.push_back(std::move(r));
    }
    return out;
  }
  void OnAccepted(int32_t client, int64_t round) override { accepted.emplace_back(client, round); }
  absl::StatusOr<ModelQuality> EndRound(int64_t round, bool committed,
                                        const v1::Model& global) override {
    ModelQuality q;
    q.evaluated = committed;
    q.accuracy = global.tensors(0).data(0);  // the model's value, for the checks
    ends.emplace_back(round, committed);
    return q;
  }

  std::map<int32_t, float> delta_of;
  std::vector<int64_t> samples_;
  std::vector<TrainTask> trained;
  std::vector<std::pair<int32_t, int64_t>> accepted;  // (client, task round)
  std::vector<std::pair<int64_t, bool>> ends;         // (round, committed)

 private:
  int32_t batch_;
  int64_t model_bytes_;
  v1::Model initial_;
};

// Durations by task id, else by client, else from the capacity trace (if given), else 1 s.
// Each phase but compute is 0 for scripted totals.
class ScriptedDurations : public TaskDurations {
 public:
  explicit ScriptedDurations(const CapacityTrace* capacity = nullptr) : capacity_(capacity) {}
  absl::StatusOr<TaskTiming> Timing(const TrainTask& task, const TaskWork& work,
                                    int64_t model_bytes) override {
    TaskTiming t;
    if (auto it = by_task.find(task.task_id); it != by_task.end()) {
      t.compute_s = it->second;
    } else if (auto c = by_client.find(task.client); c != by_client.end()) {
      t.compute_s = c->second;
    } else if (capacity_ != nullptr) {
      return ComputeTaskTiming(capacity_->ForClient(task.client), work.examples, model_bytes,
                               task.upload_bytes > 0 ? task.upload_bytes : model_bytes,
                               work.cache_hits, work.cache_misses);
    } else {
      t.compute_s = 1.0;
    }
    return t;
  }
  std::map<std::string, double> by_task;
  std::map<int32_t, double> by_client;

 private:
  const CapacityTrace* capacity_;
};

// Keeps every row and record.
class Collect : public RoundSink {
 public:
  void OnRound(const RoundRow& r) override { rows.push_back(r); }
  void OnRecord(const v1::RoundRecord& record, const v1::Model* model) override {
    records.push_back(record);
    models.push_back(model != nullptr ? model->tensors(0).data(0) : -1.0f);
  }
  std::vector<RoundRow> rows;
  std::vector<v1::RoundRecord> records;
  std::vector<float> models;  // the committed model's first value, -1 for failed rounds
};

// Three devices: computation 10 / 20 / 40 ms per sample, 1000 / 500 / 250 kbit/s, 10 KB.
inline CapacityTrace ThreeDevices() {
  return *CapacityTrace::FromRows({{1, 10, 1000, 10}, {2, 20, 500, 10}, {3, 40, 250, 10}}, "t");
}

// One availability row per client with the given windows, period `finish` seconds.
inline AvailabilityTrace Windows(std::vector<std::vector<std::pair<double, double>>> windows,
                                 double finish) {
  std::vector<AvailabilityRowSpec> rows(windows.size());
  for (size_t i = 0; i < windows.size(); ++i) {
    rows[i].trace_id = static_cast<int64_t>(i);
    rows[i].finish_time_s = finish;
    rows[i].windows = windows[i];
  }
  return *AvailabilityTrace::FromRows(std::move(rows), "t", false);
}

// A resolved SimConfig for `n` clients: K = `k`, overcommit `overcommit`, batch 20 x 5 local
// steps, random selection, `rounds` rounds.
inline v1::SimConfig HandConfig(int32_t n, int32_t k, double overcommit, int32_t rounds) {
  v1::SimConfig c;
  c.set_num_clients(n);
  c.mutable_traces()->set_capacity_path("unused");
  v1::ServerConfig* s = c.mutable_server();
  s->set_clients_per_round(k);
  s->set_num_rounds(rounds);
  s->mutable_selection()->set_overcommit(overcommit);
  s->mutable_training()->set_batch_size(20);
  s->mutable_training()->set_local_steps(5);
  return c;
}

// Builds `config` (with `make_learner`, see BuildSimulation), runs it and returns its CSV lines
// (run name "x"); "" after a failure, which the test records.
inline std::string RunToCsv(const v1::SimConfig& config, const LearnerFactory& make_learner = {}) {
  auto sim = BuildSimulation(config, make_learner);
  EXPECT_TRUE(sim.ok()) << sim.status();
  if (!sim.ok()) return "";
  struct Lines : RoundSink {
    void OnRound(const RoundRow& r) override { out << RoundCsvLine("x", r) << "\n"; }
    std::ostringstream out;
  } lines;
  auto summary = (*sim)->simulator->Run(&lines);
  EXPECT_TRUE(summary.ok()) << summary.status();
  return lines.out.str();
}

}  // namespace fedsched::sim::testing

#endif  // FEDSCHED_TESTS_SIM_ENGINE_SCRIPTED_PARTS_H_

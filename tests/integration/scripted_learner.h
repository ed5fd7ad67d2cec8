// Scripted training for the two-clocks tests (engine_equivalence_test, jobs_equivalence_test):
// a small model and updates and work that are a function of the client and the round only, so
// that the server's side (scripted devices uploading to a Coordinator) and the simulator's side
// (ScriptedLearner) build the same bytes.
#ifndef FEDSCHED_TESTS_INTEGRATION_SCRIPTED_LEARNER_H_
#define FEDSCHED_TESTS_INTEGRATION_SCRIPTED_LEARNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fedsched/v1/tensor.pb.h"
#include "sim/engine/learner.h"

namespace fedsched::testing {

// The initial model: one tensor "w" of `size` floats, 0.1 * i.
inline v1::Model InitialModel(int size) {
  v1::Model model;
  v1::Tensor* w = model.add_tensors();
  w->set_name("w");
  w->add_shape(size);
  for (int i = 0; i < size; ++i) w->add_data(0.1f * static_cast<float>(i));
  return model;
}

// The update (delta) of `client` in `round` for the model of `size` floats: a function of both
// only, so both sides build the same.
inline v1::Model ScriptedDelta(int32_t client, int64_t round, int size) {
  v1::Model delta = InitialModel(size);
  for (int i = 0; i < size; ++i) {
    delta.mutable_tensors(0)->set_data(
        i, 0.01f * static_cast<float>((client + 1) * (i + 1)) / static_cast<float>(round + 1));
  }
  return delta;
}

// The local work of `client` in `round`: `local_steps` minibatches of `batch` samples, all cache
// misses, with a loss of 1 / (round + client + 1).
inline sim::TaskWork ScriptedWork(int32_t client, int64_t round, int32_t local_steps,
                                  int32_t batch) {
  sim::TaskWork work;
  work.examples = static_cast<int64_t>(local_steps) * batch;
  work.cache_misses = work.examples;
  work.mean_loss = 1.0 / static_cast<double>(round + client + 1);
  work.statistical_utility = static_cast<double>(work.examples) * work.mean_loss;
  return work;
}

// The simulator's learner of the scripted scenarios: starts from InitialModel(model_size),
// trains every task to ScriptedWork and ScriptedDelta, gives every client 100 samples and
// evaluates nothing.
class ScriptedLearner : public sim::Learner {
 public:
  // `model_size`: floats of the model; `batch`: the minibatch size of ScriptedWork.
  ScriptedLearner(int model_size, int32_t batch)
      : model_size_(model_size), batch_(batch), initial_(InitialModel(model_size)) {}

  const v1::Model& initial_model() const override { return initial_; }
  int64_t ModelBytes() const override { return static_cast<int64_t>(initial_.ByteSizeLong()); }
  int64_t NumSamples(int32_t) const override { return 100; }
  absl::StatusOr<std::vector<sim::TrainedTask>> Train(absl::Span<const sim::TrainTask> tasks,
                                                      const v1::Model&) override {
    std::vector<sim::TrainedTask> out;
    for (const sim::TrainTask& t : tasks) {
      out.push_back({ScriptedWork(t.client, t.round, t.local_steps, batch_),
                     std::make_shared<v1::Model>(ScriptedDelta(t.client, t.round, model_size_))});
    }
    return out;
  }
  absl::StatusOr<sim::ModelQuality> EndRound(int64_t, bool, const v1::Model&) override {
    return sim::ModelQuality();
  }

 private:
  const int model_size_;
  const int32_t batch_;
  const v1::Model initial_;
};

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_INTEGRATION_SCRIPTED_LEARNER_H_

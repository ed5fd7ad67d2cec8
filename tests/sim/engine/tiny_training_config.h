// The small real-training simulation the simulator's tests share: 20 clients training an MLP
// through TrainingLearner (sim/engine/training_learner.h).
#ifndef FEDSCHED_TESTS_SIM_ENGINE_TINY_TRAINING_CONFIG_H_
#define FEDSCHED_TESTS_SIM_ENGINE_TINY_TRAINING_CONFIG_H_

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "sim/engine/setup.h"

namespace fedsched::sim {

// The source tree: FEDSCHED_SOURCE_DIR (set by ctest), else /work/main.
inline std::string SourceDir() {
  const char* src = std::getenv("FEDSCHED_SOURCE_DIR");
  return src != nullptr ? src : "/work/main";
}

// 20 clients, Dirichlet alpha 1 (mild skew), batch 20 x 5 local steps, lr 0.1, MLP 784-32-10,
// K = 8, evaluated after round 1 and every 3 rounds on the 10,000 test images.
inline v1::SimConfig TinyConfig() {
  v1::SimConfig c;
  c.set_num_clients(20);
  c.set_train_threads(2);
  c.set_quiet(true);
  v1::ServerConfig* s = c.mutable_server();
  s->set_clients_per_round(8);
  s->set_num_rounds(3);
  s->set_seed(3);
  s->mutable_training()->set_batch_size(20);
  s->mutable_training()->set_local_steps(5);
  s->mutable_training()->set_learning_rate(0.1f);
  s->mutable_model()->set_architecture("mlp");
  s->mutable_model()->set_hidden_units(32);
  s->mutable_model()->set_init_seed(1);
  s->mutable_cache()->set_policy(v1::CACHE_POLICY_IMPORTANCE);
  s->mutable_eval()->set_every_n_rounds(3);
  c.mutable_data()->set_dirichlet_alpha(1.0);
  c.mutable_traces()->set_capacity_path("unused");  // the learner reads no trace
  auto resolved = ResolveSimConfig(c);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *resolved;
}

}  // namespace fedsched::sim

#endif  // FEDSCHED_TESTS_SIM_ENGINE_TINY_TRAINING_CONFIG_H_

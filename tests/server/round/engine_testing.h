// Helpers shared by the round engine's tests.
#ifndef FEDSCHED_TESTS_SERVER_ROUND_ENGINE_TESTING_H_
#define FEDSCHED_TESTS_SERVER_ROUND_ENGINE_TESTING_H_

#include <cstdint>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "fedsched/v1/tensor.pb.h"
#include "server/round/engine.h"
#include "server/round/round_config.h"

namespace fedsched::round::testing {

// A model with one tensor "w" of shape [2], both values `value`.
inline v1::Model OneTensor(float value) {
  v1::Model model;
  v1::Tensor* t = model.add_tensors();
  t->set_name("w");
  t->add_shape(2);
  t->add_data(value);
  t->add_data(value);
  return model;
}

// Reachable: exactly the clients in `online`.
class FakePresence : public Presence {
 public:
  bool IsReachable(ClientIndex index, double) const override { return online.contains(index); }
  void CollectReachable(double, std::vector<ClientIndex>* out) const override {
    out->assign(online.rbegin(), online.rend());  // any order: the engine sorts
  }
  std::set<ClientIndex> online;
};

// Registers devices "dev-0" ... "dev-<n-1>" (100 samples each) at time 0: client indices 0..n-1.
inline absl::Status RegisterDevices(RoundEngine& engine, int n) {
  for (int i = 0; i < n; ++i) {
    v1::DeviceProfile device;
    device.set_num_samples(100);
    absl::Status s = engine.Register(absl::StrCat("dev-", i), device, 0).status();
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The small synchronous round of the engine's tests: K = 2 with three tasks a round (overcommit
// 1.5), min_updates 1, min_online_clients 2, 5 rounds, a 10 s deadline, 2 local steps of 4.
inline void SetSmallRound(v1::ServerConfig& raw) {
  raw.set_clients_per_round(2);
  raw.set_min_updates(1);
  raw.set_min_online_clients(2);
  raw.set_num_rounds(5);
  raw.set_round_deadline_s(10);
  raw.mutable_selection()->set_overcommit(1.5);
  raw.mutable_training()->set_local_steps(2);
  raw.mutable_training()->set_batch_size(4);
}

// An engine over the model OneTensor(1) for `raw` (ResolveRoundConfig), with four devices
// registered (RegisterDevices), all online in `presence`, and version 0 published.
inline absl::StatusOr<std::unique_ptr<RoundEngine>> StartFourDevices(const v1::ServerConfig& raw,
                                                                     FakePresence& presence) {
  absl::StatusOr<v1::ServerConfig> config = ResolveRoundConfig(raw);
  if (!config.ok()) return config.status();
  EngineOptions options;
  options.config = *config;
  options.model = OneTensor(1);
  options.presence = &presence;
  absl::StatusOr<std::unique_ptr<RoundEngine>> engine = RoundEngine::Create(std::move(options));
  if (!engine.ok()) return engine.status();
  if (absl::Status s = RegisterDevices(**engine, 4); !s.ok()) return s;
  for (int i = 0; i < 4; ++i) presence.online.insert(i);
  if (absl::Status s = (*engine)->Publish(0, (*engine)->model(), nullptr); !s.ok()) return s;
  return engine;
}

// Folds `task`'s update: a delta of `value` everywhere (OneTensor), `examples` examples,
// arriving at `now`. Returns the engine's verdict.
inline absl::Status FoldDelta(RoundEngine& engine, const Task& task, float value, int64_t examples,
                              double now) {
  v1::Model delta = OneTensor(value);
  Update u;
  u.claim = {
      .index = task.index, .task_id = task.task_id, .round = task.round, .num_examples = examples};
  u.delta = &delta;
  u.metrics.set_num_examples(examples);
  u.now_s = now;
  return engine.FoldUpdates({&u, 1})[0];
}

}  // namespace fedsched::round::testing

#endif  // FEDSCHED_TESTS_SERVER_ROUND_ENGINE_TESTING_H_

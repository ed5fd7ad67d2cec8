// Helpers shared by the round engine's tests.
#ifndef FEDSCHED_TESTS_SERVER_ROUND_ENGINE_TESTING_H_
#define FEDSCHED_TESTS_SERVER_ROUND_ENGINE_TESTING_H_

#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "fedsched/v1/tensor.pb.h"
#include "server/round/engine.h"

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

}  // namespace fedsched::round::testing

#endif  // FEDSCHED_TESTS_SERVER_ROUND_ENGINE_TESTING_H_

// The random baseline of matcher.h: each idle device goes to a uniformly drawn eligible job.

#include <cstdint>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include "server/jobs/matcher.h"
#include "server/planner/selection_draws.h"

namespace fedsched::jobs {
namespace {

class RandomMatcher : public DeviceJobMatcher {
 public:
  explicit RandomMatcher(uint64_t seed) : rng_(seed) {}

  std::string_view name() const override { return "random"; }

  void Match(const MatchInput& input, std::vector<int>* job_of_device) override {
    job_of_device->assign(input.devices.size(), -1);
    std::vector<int> wanting;
    for (size_t d = 0; d < input.devices.size(); ++d) {
      wanting.clear();
      for (int j : input.devices[d].eligible) {
        if (input.jobs[j].demand > 0) wanting.push_back(j);
      }
      // No draw for a device with no choice, so that the sequence of draws depends only on the
      // devices that have one (a device with a single job gets it either way).
      if (wanting.size() == 1) (*job_of_device)[d] = wanting[0];
      if (wanting.size() < 2) continue;
      (*job_of_device)[d] = wanting[planner::UniformIndex(rng_, wanting.size())];
    }
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<DeviceJobMatcher> MakeRandomMatcher(uint64_t seed) {
  return std::make_unique<RandomMatcher>(seed);
}

}  // namespace fedsched::jobs

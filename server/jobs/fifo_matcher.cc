// The FIFO baseline of matcher.h: first come, first served by (priority, submission order).

#include <algorithm>
#include <memory>
#include <numeric>
#include <string_view>
#include <vector>

#include "server/jobs/matcher.h"

namespace fedsched::jobs {
namespace {

class FifoMatcher : public DeviceJobMatcher {
 public:
  std::string_view name() const override { return "fifo"; }

  void Match(const MatchInput& input, std::vector<int>* job_of_device) override {
    // rank[j]: job j's place in (priority desc, sequence asc) order; the name breaks ties so
    // that two jobs with one sequence (a caller's mistake) still match deterministically.
    std::vector<int> order(input.jobs.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      const MatchJob& x = input.jobs[a];
      const MatchJob& y = input.jobs[b];
      if (x.priority != y.priority) return x.priority > y.priority;
      if (x.sequence != y.sequence) return x.sequence < y.sequence;
      return x.name < y.name;
    });
    std::vector<int> rank(input.jobs.size());
    for (size_t r = 0; r < order.size(); ++r) rank[order[r]] = static_cast<int>(r);

    job_of_device->assign(input.devices.size(), -1);
    for (size_t d = 0; d < input.devices.size(); ++d) {
      int best = -1;
      for (int j : input.devices[d].eligible) {
        if (input.jobs[j].demand <= 0) continue;
        if (best < 0 || rank[j] < rank[best]) best = j;
      }
      (*job_of_device)[d] = best;
    }
  }
};

}  // namespace

std::unique_ptr<DeviceJobMatcher> MakeFifoMatcher() { return std::make_unique<FifoMatcher>(); }

}  // namespace fedsched::jobs

#include "server/profile/utility_noise.h"

#include <algorithm>
#include <vector>

namespace fedsched::profile {

std::optional<double> MedianReportedUtility(const ProfileBook& book) {
  std::vector<double> utilities;
  for (ClientIndex i = 0; i < static_cast<ClientIndex>(book.size()); ++i) {
    const ClientState& s = book.state(i);
    if (s.has_utility && !s.retired) utilities.push_back(s.statistical_utility);
  }
  if (utilities.empty()) return std::nullopt;
  // nth_element: linear time, which matters at 100,000 clients planned every round.
  const size_t mid = utilities.size() / 2;
  std::nth_element(utilities.begin(), utilities.begin() + mid, utilities.end());
  const double upper = utilities[mid];
  if (utilities.size() % 2 == 1) return upper;
  // Even count: the lower middle is the largest of the values before `mid`.
  const double lower = *std::max_element(utilities.begin(), utilities.begin() + mid);
  return (lower + upper) / 2.0;
}

double UtilityNoiseStddev(const ProfileBook& book, double noise_factor) {
  if (noise_factor <= 0) return 0.0;
  const std::optional<double> median = MedianReportedUtility(book);
  return median.has_value() ? noise_factor * *median : 0.0;
}

}  // namespace fedsched::profile

#include "sim/trace/availability_profile.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fedsched::sim {
namespace {

// A dense id per distinct row pattern (period and windows), indexed by row.
std::vector<int64_t> PatternIds(const AvailabilityTrace& trace) {
  std::map<std::pair<double, std::vector<std::pair<double, double>>>, int64_t> ids;
  std::vector<int64_t> of_row(static_cast<size_t>(trace.size()));
  for (int64_t r = 0; r < trace.size(); ++r) {
    std::pair<double, std::vector<std::pair<double, double>>> key{trace.FinishTime(r), {}};
    for (int64_t k = 0; k < trace.NumWindows(r); ++k) key.second.push_back(trace.Window(r, k));
    of_row[static_cast<size_t>(r)] =
        ids.emplace(std::move(key), static_cast<int64_t>(ids.size())).first->second;
  }
  return of_row;
}

}  // namespace

absl::StatusOr<std::vector<AvailabilitySample>> AvailabilityProfile(const AvailabilityTrace& trace,
                                                                    int64_t num_clients,
                                                                    double start_s, double span_s,
                                                                    double step_s) {
  if (num_clients < 1 || !std::isfinite(start_s) || start_s < 0 || !(span_s > 0) ||
      !std::isfinite(span_s) || !(step_s > 0) || span_s / step_s > 1e6) {
    return absl::InvalidArgumentError(absl::StrCat(
        "availability profile: need num_clients >= 1, start_s >= 0, span_s > 0, step_s > 0 and "
        "at most 1,000,000 samples; got ",
        num_clients, " clients, start ", start_s, " s, span ", span_s, " s, step ", step_s, " s"));
  }
  const std::vector<int64_t> pattern = PatternIds(trace);
  std::vector<int64_t> seen(pattern.size(), -1);  // last sample index a pattern was counted in
  std::vector<AvailabilitySample> samples;
  for (int64_t i = 0; start_s + static_cast<double>(i) * step_s < start_s + span_s; ++i) {
    AvailabilitySample s;
    s.t_s = start_s + static_cast<double>(i) * step_s;
    for (int64_t c = 0; c < num_clients; ++c) {
      if (!trace.IsAvailable(c, s.t_s)) continue;
      ++s.online_clients;
      const int64_t p = pattern[static_cast<size_t>(trace.RowOf(c))];
      if (seen[static_cast<size_t>(p)] != i) {
        seen[static_cast<size_t>(p)] = i;
        ++s.online_patterns;
      }
    }
    samples.push_back(s);
  }
  return samples;
}

absl::Status WriteAvailabilityProfileCsv(const std::string& path,
                                         const std::vector<AvailabilitySample>& samples,
                                         int64_t num_clients) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return absl::InternalError(absl::StrCat("cannot write ", path));
  std::fprintf(f, "t_h,online_clients,online_fraction,online_patterns\n");
  for (const AvailabilitySample& s : samples) {
    std::fprintf(f, "%.4f,%lld,%.5f,%lld\n", s.t_s / 3600.0,
                 static_cast<long long>(s.online_clients),
                 static_cast<double>(s.online_clients) / static_cast<double>(num_clients),
                 static_cast<long long>(s.online_patterns));
  }
  if (std::fclose(f) != 0) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace fedsched::sim

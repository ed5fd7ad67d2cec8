#include "bench/load/load_stats.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace fedsched::load {

ProcStats ReadProc(int pid) {
  ProcStats stats;
  if (pid <= 0) return stats;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (std::getline(stat, line)) {
    // Fields after the parenthesised command: state is field 3; utime 14, stime 15.
    const size_t close = line.rfind(')');
    std::istringstream rest(line.substr(close + 2));
    std::vector<std::string> fields;
    std::string f;
    while (rest >> f) fields.push_back(f);
    if (fields.size() > 12) {
      const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
      stats.cpu_seconds = (std::stod(fields[11]) + std::stod(fields[12])) / ticks;
    }
  }
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) stats.peak_rss_kb = std::stoll(line.substr(6));
    if (line.rfind("VmRSS:", 0) == 0) stats.rss_kb = std::stoll(line.substr(6));
  }
  return stats;
}

double SelfCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
         usage.ru_stime.tv_usec / 1e6;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

void Counters::Add(const std::string& method, const grpc::Status& status, bool stopping) {
  absl::MutexLock lock(&mu_);
  ++calls_[method];
  if (!status.ok() && !stopping) {
    ++errors_[method];
    if (examples_.size() < 10) {
      examples_.push_back(
          absl::StrCat(method, ": ", status.error_code(), " ", status.error_message()));
    }
  }
}

int64_t Counters::errors() const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [m, c] : errors_) n += c;
  return n;
}

std::map<std::string, int64_t> Counters::Calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

std::string Counters::Report() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [m, c] : calls_) {
    absl::StrAppend(&out, "  ", m, ": ", c, " calls, ", errors_.count(m) ? errors_.at(m) : 0,
                    " errors\n");
  }
  for (const std::string& e : examples_) absl::StrAppend(&out, "  error: ", e, "\n");
  return out;
}

}  // namespace fedsched::load

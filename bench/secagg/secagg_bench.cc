// Measures one secure-aggregation round of the protocol core (secagg::RunLocalRound: every
// client and the server in this process, messages passed in memory, no RPC) for cohorts of K
// clients with P parameters: CPU seconds of the server and of each client (thread CPU clock
// around each party's steps), and the bytes of the serialised protocol messages. Beside it, the
// same round without secure aggregation: the server folds K plain float32 updates (weighted
// sum) and each client uploads 4 P bytes. docs/reports/BENCHMARKS.md "Secure aggregation".
//
//   build/bench/secagg/secagg_bench --clients=10,50,100 --params=1000000 --drop=0,0.1
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/common/bench_util.h"
#include "secagg/graph.h"
#include "secagg/local_round.h"
#include "secagg/quantize.h"

ABSL_FLAG(std::string, clients, "10,50,100", "cohort sizes K, comma-separated");
ABSL_FLAG(int64_t, params, 1000000, "parameters per update");
ABSL_FLAG(std::string, drop, "0,0.1",
          "fractions of the cohort that drop after sharing keys (before the masked input)");

namespace fedsched::secagg {
namespace {

// Thread CPU seconds per party: index 0 the server, i + 1 client i.
class CpuObserver : public LocalRoundObserver {
 public:
  explicit CpuObserver(uint32_t n) : seconds_(n + 1, 0.0) {}
  void Enter(int party) override { start_ = bench::ThreadCpuSeconds(); }
  void Leave(int party) override { seconds_[party + 1] += bench::ThreadCpuSeconds() - start_; }
  double server() const { return seconds_[0]; }
  double client_mean() const {
    double s = 0;
    for (size_t i = 1; i < seconds_.size(); ++i) s += seconds_[i];
    return s / (seconds_.size() - 1);
  }
  double client_max() const { return *std::max_element(seconds_.begin() + 1, seconds_.end()); }

 private:
  std::vector<double> seconds_;
  double start_ = 0;
};

std::vector<float> Update(int64_t params) {
  std::vector<float> u(params);
  uint32_t state = 12345;
  for (float& v : u) {
    state = state * 1664525u + 1013904223u;
    v = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 1e-3f;
  }
  return u;
}

// The plain round: the server's weighted float32 fold of K updates, and the bytes of K uploads.
double PlainServerSeconds(const std::vector<float>& update, uint32_t n) {
  std::vector<float> sum(update.size(), 0.0f);
  const double start = bench::ThreadCpuSeconds();
  for (uint32_t k = 0; k < n; ++k) {
    const float w = 1.0f / n;
    for (size_t e = 0; e < update.size(); ++e) sum[e] += w * update[e];
  }
  const double seconds = bench::ThreadCpuSeconds() - start;
  std::printf("%s", sum[0] == 12345.0f ? " " : "");  // keep the fold
  return seconds;
}

std::string& Tokens() {
  static std::string tokens;
  return tokens;
}

void RunOne(uint32_t n, const std::vector<float>& update, double drop_fraction, bool print) {
  fedsched::v1::SecAggRoundParams p;
  p.set_round_id(1);
  p.set_cohort_size(n);
  p.set_degree(ChooseDegree(n));
  p.set_threshold(ChooseThreshold(p.degree()));
  p.set_graph_seed(std::string(32, 'g'));
  p.set_vector_length(update.size());
  p.set_clip_norm(10.0);
  std::vector<absl::Span<const float>> updates(n, absl::MakeConstSpan(update));
  std::vector<double> weights(n, 1.0);
  std::vector<DropPoint> drops(n, DropPoint::kNever);
  const uint32_t dropped = static_cast<uint32_t>(drop_fraction * n);
  // Spread over the ring of indices (the graph relabels them anyway).
  for (uint32_t d = 0; d < dropped; ++d) drops[(d * n) / dropped] = DropPoint::kBeforeMaskedInput;
  CpuObserver cpu(n);
  const LocalRoundResult r = RunLocalRound(p, updates, weights, drops, Bytes32{}, &cpu);
  if (!r.sum.ok()) {
    std::printf("K=%u drop=%u: round failed: %s\n", n, dropped, r.sum.status().ToString().c_str());
    return;
  }
  if (!print) return;
  const uint32_t contributors = static_cast<uint32_t>(r.sum->contributors.size());
  double worst = 0;
  for (size_t e = 0; e < update.size(); ++e) {
    worst =
        std::max(worst, std::abs(r.sum->sum[e] - static_cast<double>(update[e]) * contributors));
  }
  // key=value tokens of the deterministic figures, printed after the table
  // (scripts/check_doc_figures.py reads them; the last configuration's win).
  Tokens() += absl::StrFormat("K=%u dropped=%u protocol_mib=%.1f per_client_mib=%.2f\n", n, dropped,
                              r.bytes.Total() / (1024.0 * 1024.0),
                              static_cast<double>(r.bytes.Total()) / n / (1024.0 * 1024.0));
  const double plain_server = PlainServerSeconds(update, n);
  const double mib = 1024.0 * 1024.0;
  std::printf(
      "| %3u | %2u | %2u | %2u | %7.3f | %7.3f | %7.3f | %7.1f | %6.2f | %7.1f | %7.3f | %6.2f | "
      "%.1e (bound %.1e) |\n",
      n, p.degree(), p.threshold(), dropped, cpu.server(), cpu.client_mean(), cpu.client_max(),
      r.bytes.Total() / mib, static_cast<double>(r.bytes.Total()) / n / mib,
      (r.bytes.to_server[2]) / mib, plain_server, 4.0 * update.size() / mib, worst,
      r.sum->error_bound);
  std::fflush(stdout);
}

}  // namespace
}  // namespace fedsched::secagg

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t params = absl::GetFlag(FLAGS_params);
  const std::vector<float> update = fedsched::secagg::Update(params);
  {  // Warm-up: OpenSSL's first algorithm fetches and page faults stay out of the figures.
    const std::vector<float> small = fedsched::secagg::Update(1000);
    fedsched::secagg::RunOne(5, small, 0.0, /*print=*/false);
  }
  std::printf("secure aggregation protocol core, P = %lld parameters, clip norm 10, float32\n",
              static_cast<long long>(params));
  std::printf(
      "| K | k | t | dropped | server CPU s | client CPU s (mean) | client CPU s (max) | "
      "protocol MiB (all) | MiB per client | of which masked inputs MiB | plain server CPU s | "
      "plain MiB per client | max error "
      "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (absl::string_view k : absl::StrSplit(absl::GetFlag(FLAGS_clients), ',')) {
    uint32_t n = 0;
    if (!absl::SimpleAtoi(k, &n)) return 2;
    for (absl::string_view d : absl::StrSplit(absl::GetFlag(FLAGS_drop), ',')) {
      double fraction = 0;
      if (!absl::SimpleAtod(d, &fraction)) return 2;
      fedsched::secagg::RunOne(n, update, fraction, /*print=*/true);
    }
  }
  std::printf("%s", fedsched::secagg::Tokens().c_str());
  return 0;
}

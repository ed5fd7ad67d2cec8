// fedsched-epsilon: the privacy accountant (server/privacy/rdp_accountant.h) on the command line,
// for planning a budget and for the figures of docs/guides/PRIVACY.md.
//
//   fedsched-epsilon --q=0.01 --noise_multiplier=1.1 --rounds=1,10,100,1000 --delta=1e-5
//
// Prints one line per round count, as key=value tokens (scripts/check_doc_figures.py reads them):
// rounds=N epsilon=E order=A, epsilon by Renyi DP of the Poisson-subsampled Gaussian with the
// Balle et al. 2020 conversion and A the order that attains it. Exits 2 on bad input.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/flags_usage.h"
#include "server/privacy/rdp_accountant.h"

ABSL_FLAG(double, q, 0.01, "Sampling rate: expected cohort / population, in [0, 1].");
ABSL_FLAG(double, noise_multiplier, 1.0, "z: noise standard deviation / clip norm, > 0.");
ABSL_FLAG(std::string, rounds, "1,10,100,1000", "Comma-separated round counts.");
ABSL_FLAG(double, delta, 1e-5, "delta of the (epsilon, delta) guarantee, in (0, 1).");

int main(int argc, char** argv) {
  fedsched::SetUsage("fedsched privacy accountant: epsilon after a number of rounds");
  absl::ParseCommandLine(argc, argv);
  const double q = absl::GetFlag(FLAGS_q);
  const double z = absl::GetFlag(FLAGS_noise_multiplier);
  const double delta = absl::GetFlag(FLAGS_delta);
  std::printf("# q %g, noise_multiplier %g, delta %g\n", q, z, delta);
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_rounds), ',')) {
    int64_t rounds = 0;
    if (!absl::SimpleAtoi(part, &rounds) || rounds < 0) {
      std::fprintf(stderr, "fedsched-epsilon: --rounds: '%s' is not a round count\n",
                   std::string(part).c_str());
      return 2;
    }
    fedsched::privacy::RdpAccountant accountant;
    absl::Status s = accountant.Compose(q, z, rounds);
    absl::StatusOr<fedsched::privacy::EpsilonAtOrder> e =
        s.ok() ? accountant.Epsilon(delta) : absl::StatusOr<fedsched::privacy::EpsilonAtOrder>(s);
    if (!e.ok()) {
      std::fprintf(stderr, "fedsched-epsilon: %s\n", e.status().ToString().c_str());
      return 2;
    }
    std::printf("rounds=%lld epsilon=%.6g order=%g\n", static_cast<long long>(rounds), e->epsilon,
                e->order);
  }
  return 0;
}

#include "bench/ingest/ingest_reporter.h"

#include <cstdio>

namespace fedsched::bench::ingest {

void IngestReporter::ReportRuns(const std::vector<Run>& runs) {
  ConsoleReporter::ReportRuns(runs);
  for (const Run& run : runs) {
    if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
    if (run.run_name.function_name == "Ingest") {
      ingest_.emplace_back(run.run_name.args, run.counters);
    } else if (run.run_name.function_name == "Step") {
      steps_.emplace_back(run.run_name.args, run.counters);
    }
  }
}

void IngestReporter::Finalize() {
  ConsoleReporter::Finalize();
  std::FILE* out = stdout;
  if (!ingest_.empty()) {
    std::fprintf(out,
                 "\nServer ingest vs raw gRPC client streaming: MB/s of update data (same "
                 "clients, bytes and chunks; interleaved; wall time)\n");
    std::fprintf(out, "%-16s %9s %13s %11s %6s %17s %17s %7s %12s\n", "clients/params", "update MB",
                 "baseline MB/s", "ingest MB/s", "ratio", "CPU s/GB base/ing", "srv CPU base/ing",
                 "target", "updates/fold");
    for (const auto& [args, c] : ingest_) {
      const double ratio = c.at("ratio%").value;
      std::fprintf(out, "%-16s %9.1f %13.0f %11.0f %5.0f%% %8.2f/%-8.2f %8.2f/%-8.2f %7s %12.2f\n",
                   args.c_str(), c.at("update_MB").value, c.at("baseline_MBps").value,
                   c.at("ingest_MBps").value, ratio, c.at("base_cpu_s/GB").value,
                   c.at("ing_cpu_s/GB").value, c.at("base_srv_cpu_s/GB").value,
                   c.at("ing_srv_cpu_s/GB").value, ratio >= 50.0 ? "met" : "missed",
                   c.at("updates/fold").value);
    }
    std::fprintf(out,
                 "(target: ingest >= 50%% of the baseline. CPU = whole process per GB of "
                 "payload; srv = the process minus the sending client threads)\n");
  }
  if (!steps_.empty()) {
    std::fprintf(out,
                 "\nServer work per update on one thread: GB/s of payload (thread CPU); "
                 "fresh = newly allocated memory, reused = recycled\n");
    std::fprintf(out, "%-10s %10s %11s %8s %11s %12s %10s\n", "params", "fresh copy", "reused copy",
                 "sha256", "parse fresh", "parse reused", "accumulate");
    for (const auto& [args, c] : steps_) {
      std::fprintf(out, "%-10s %10.2f %11.2f %8.2f %11.2f %12.2f %10.2f\n", args.c_str(),
                   c.at("fresh_copy_GBps").value, c.at("reused_copy_GBps").value,
                   c.at("sha256_GBps").value, c.at("parse_fresh_GBps").value,
                   c.at("parse_reused_GBps").value, c.at("accumulate_GBps").value);
    }
  }
  std::fflush(out);
}

}  // namespace fedsched::bench::ingest

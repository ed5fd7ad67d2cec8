// fedsched-sim: replays device traces through the server's round engine (server/round: planner,
// closing, aggregation) and fedsched's training code over a virtual clock (see
// sim/engine/simulator.h and docs/guides/SIMULATION.md). Round-setting flags write into the
// config's `server` block, the ServerConfig the coordination server reads.
//
//   fedsched-sim --config=configs/sim/fmnist_1000.textproto --policy=fedcase --seed=2
//                --output_csv=runs/fedcase_2.csv --plot_png=runs/acc.png
//   fedsched-sim --plot_png=acc.png --plot_csvs=random=a.csv,oort=b.csv --target=0.75
//   mpirun -np 4 fedsched-sim --config=...   (training over 4 ranks, the same CSV: sim/mpi)
//   fedsched-sim --config=configs/sim/three_jobs.textproto --output_csv=runs/jobs/jct.csv
//                (a job trace over one fleet: the JCT summary and one CSV per job beside it)
//   fedsched-sim --config=configs/sim/tta2d_scarce9_g50.textproto --availability_profile_csv=p.csv
//                (the trace's clients and distinct patterns online over time; no simulation)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/cache/cache_policy.h"
#include "common/config.h"
#include "common/exec_sibling.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"
#include "fedsched/v1/sim.pb.h"
#include "sim/engine/job_output.h"
#include "sim/engine/job_simulation.h"
#include "sim/engine/output.h"
#include "sim/engine/setup.h"
#include "sim/engine/training_learner.h"
#include "sim/mpi/cluster.h"
#ifdef FEDSCHED_HAVE_TORCH
#include "sim/torch/torch_trainers.h"
#endif
#include "sim/trace/availability_profile.h"
#include "sim/trace/text_table.h"

ABSL_FLAG(std::string, config, "", "SimConfig in protobuf text format (configs/sim/)");
ABSL_FLAG(std::string, policy, "",
          "override server.selection.policy: random | oort | fedcase | pyramidfl | fedsched; "
          "also sets the policy's own cache (random, oort, pyramidfl, fedsched: lru; fedcase: "
          "importance) unless --cache_policy is given");
ABSL_FLAG(std::string, cache_policy, "",
          "override server.cache.policy: a registered cache policy name (built in: importance | "
          "lru | lfu | none)");
ABSL_FLAG(std::string, availability_forecast, "",
          "override availability_forecast, the planner's availability oracle: trace (the trace's "
          "future, FedScale's) | learned (session lengths observed so far) | none");
ABSL_FLAG(std::string, fedcase_base, "",
          "override server.selection.fedcase.base_policy: oort | random (the set FedCaSe's top "
          "clients are joined with)");
ABSL_FLAG(bool, fedbuff, false,
          "set server.aggregation.async_fedbuff (FedBuff: asynchronous buffered aggregation)");
ABSL_FLAG(uint64_t, seed, 0, "override server.seed (0 = keep)");
ABSL_FLAG(bool, no_fit_checks, false,
          "set server.selection.fit.disable: the planner does not check memory budgets "
          "(docs/guides/RESOURCE_FIT.md)");
ABSL_FLAG(int32_t, num_rounds, 0, "override server.num_rounds (0 = keep)");
ABSL_FLAG(double, utility_noise_factor, -1,
          "override server.selection.utility_noise_factor: noise on the devices' utility "
          "reports, x the median report (docs/guides/PRIVACY.md; 0 = off, negative = keep)");
ABSL_FLAG(std::string, set, "",
          "SimConfig fragment in text format merged over the config after the other flags, e.g. "
          "'traces { start_time_s: 86400 }' (non-default values replace the config's; paths are "
          "relative to the current directory)");
ABSL_FLAG(std::string, run_name, "", "override SimConfig.run_name");
ABSL_FLAG(std::string, output_csv, "", "override SimConfig.output_csv");
ABSL_FLAG(std::string, plot_png, "", "write a PNG of accuracy vs virtual hours");
ABSL_FLAG(std::string, plot_csvs, "",
          "plot-only mode: comma-separated label=csv pairs, one curve each");
ABSL_FLAG(std::string, availability_profile_csv, "",
          "write the availability profile of --config's trace to this CSV (every 10 minutes over "
          "one period from traces.start_time_s: clients and distinct patterns online), print its "
          "summary and exit without simulating");
ABSL_FLAG(double, target, 0,
          "dashed target-accuracy line on the plot, with each run's time to target marked "
          "(0 = the config's target_accuracy in a run, none in plot-only mode)");
ABSL_FLAG(std::string, plot_title, "",
          "plot title; \\n starts a second line (default: run, policy, cache and seed, then "
          "config and trace files; in plot-only mode the curves' labels)");
ABSL_FLAG(bool, quiet, false, "no progress line");
ABSL_FLAG(std::string, trainer, "",
          "override SimConfig.trainer: reference (the Eigen models) | torch (the LibTorch trainer "
          "for the cnn architecture; needs a build with libtorch-dev)");

ABSL_FLAG(int64_t, max_trace_bytes, fedsched::sim::TraceLimits().max_file_bytes,
          "Largest trace file the simulator reads (bytes); a larger one is refused.");
ABSL_FLAG(int64_t, max_trace_rows, fedsched::sim::TraceLimits().max_rows,
          "Most rows (CSV rows, JSON lines) in one trace file; more are refused.");
ABSL_FLAG(int64_t, max_trace_windows, fedsched::sim::TraceLimits().max_windows,
          "Most availability windows in one trace (all clients together); more are refused.");

namespace fedsched::sim {
namespace {

// The trainers of this build: with LibTorch, SimConfig.trainer "torch" as well (sim/torch).
TrainerFactory Trainers() {
#ifdef FEDSCHED_HAVE_TORCH
  return MakeSimTrainer;
#else
  return MakeBuiltinTrainer;
#endif
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "fedsched-sim: %s\n", s.ToString().c_str());
  return 1;
}

int PlotOnly() {
  std::vector<std::pair<std::string, std::string>> curves;
  for (absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_plot_csvs), ',')) {
    // "label=path", or just "path" (labelled by itself).
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.second.empty()) kv.second = kv.first;
    curves.push_back(kv);
  }
  std::string title = absl::GetFlag(FLAGS_plot_title);
  if (title.empty()) {
    title = absl::StrCat("test accuracy vs virtual time: ",
                         absl::StrJoin(curves, ", ", [](std::string* out, const auto& curve) {
                           absl::StrAppend(out, curve.first);
                         }));
  }
  absl::Status s =
      PlotAccuracy(absl::GetFlag(FLAGS_plot_png), curves, absl::GetFlag(FLAGS_target), title);
  return s.ok() ? 0 : Fail(s);
}

// --config with the flags' overrides (--set last). Errors: INVALID_ARGUMENT without --config;
// LoadSimConfig's and the flags' own.
absl::StatusOr<v1::SimConfig> LoadConfig() {
  if (absl::GetFlag(FLAGS_config).empty()) {
    return absl::InvalidArgumentError("--config is required");
  }
  FEDSCHED_ASSIGN_OR_RETURN(v1::SimConfig config, LoadSimConfig(absl::GetFlag(FLAGS_config)));
  FEDSCHED_RETURN_IF_ERROR(ApplySelectionFlags(absl::GetFlag(FLAGS_policy),
                                               absl::GetFlag(FLAGS_cache_policy),
                                               absl::GetFlag(FLAGS_fedcase_base), &config));
  FEDSCHED_RETURN_IF_ERROR(ApplyForecastFlag(absl::GetFlag(FLAGS_availability_forecast), &config));
  v1::ServerConfig* server = config.mutable_server();
  if (absl::GetFlag(FLAGS_fedbuff)) server->mutable_aggregation()->set_async_fedbuff(true);
  if (absl::GetFlag(FLAGS_seed) != 0) server->set_seed(absl::GetFlag(FLAGS_seed));
  if (absl::GetFlag(FLAGS_no_fit_checks)) {
    server->mutable_selection()->mutable_fit()->set_disable(true);
  }
  if (absl::GetFlag(FLAGS_num_rounds) != 0) server->set_num_rounds(absl::GetFlag(FLAGS_num_rounds));
  if (absl::GetFlag(FLAGS_utility_noise_factor) >= 0) {
    server->mutable_selection()->set_utility_noise_factor(
        absl::GetFlag(FLAGS_utility_noise_factor));
  }
  if (!absl::GetFlag(FLAGS_run_name).empty()) config.set_run_name(absl::GetFlag(FLAGS_run_name));
  if (!absl::GetFlag(FLAGS_output_csv).empty()) {
    config.set_output_csv(absl::GetFlag(FLAGS_output_csv));
  }
  if (absl::GetFlag(FLAGS_quiet)) config.set_quiet(true);
  if (!absl::GetFlag(FLAGS_trainer).empty()) config.set_trainer(absl::GetFlag(FLAGS_trainer));
  FEDSCHED_RETURN_IF_ERROR(ApplyConfigOverride(absl::GetFlag(FLAGS_set), &config));
  return config;
}

// --availability_profile_csv: the profile of the config's availability trace over its longest
// period (AvailabilityProfile), as CSV, and a summary line on stdout.
int ProfileOnly(const v1::SimConfig& config) {
  const int64_t clients = config.num_clients() > 0 ? config.num_clients() : 1000;
  absl::StatusOr<AvailabilityTrace> trace = AvailabilityTrace::Load(config.traces(), clients);
  if (!trace.ok()) return Fail(trace.status());
  double period = 0;
  for (int64_t r = 0; r < trace->size(); ++r) period = std::max(period, trace->FinishTime(r));
  absl::StatusOr<std::vector<AvailabilitySample>> samples =
      AvailabilityProfile(*trace, clients, config.traces().start_time_s(), period, 600);
  if (!samples.ok()) return Fail(samples.status());
  const std::string path = absl::GetFlag(FLAGS_availability_profile_csv);
  if (absl::Status s = WriteAvailabilityProfileCsv(path, *samples, clients); !s.ok()) {
    return Fail(s);
  }
  const int64_t needed = config.server().min_online_clients() > 0
                             ? config.server().min_online_clients()
                             : std::max(1, config.server().clients_per_round());
  double online = 0, patterns = 0, short_of = 0;
  for (const AvailabilitySample& s : *samples) {
    online += static_cast<double>(s.online_clients) / static_cast<double>(clients);
    patterns += static_cast<double>(s.online_patterns);
    short_of += s.online_clients < needed ? 1 : 0;
  }
  const double n = static_cast<double>(samples->size());
  std::printf(
      "availability profile of %s over %.1f h (%lld clients, %zu samples) -> %s: mean online "
      "%.2f %%, mean distinct patterns online %.2f, time with fewer than %lld online %.1f %%\n",
      trace->description().c_str(), period / 3600.0, static_cast<long long>(clients),
      samples->size(), path.c_str(), 100 * online / n, patterns / n, static_cast<long long>(needed),
      100 * short_of / n);
  return 0;
}

// Trainer "torch" in a build without LibTorch: hands the run to fedsched-sim-torch beside this
// program (common/exec_sibling.h; does not return when there is one, and without one
// TrainingLearner refuses "torch" later). Errors: FAILED_PRECONDITION under mpirun, where every
// rank must be started as fedsched-sim-torch.
absl::Status HandOverTorchRun(const v1::SimConfig& config, mpi::Cluster* cluster, char** argv) {
#ifndef FEDSCHED_HAVE_TORCH
  if (config.trainer() == kTorchTrainer) {
    if (cluster != nullptr) {
      return absl::FailedPreconditionError(
          "trainer \"torch\" under mpirun: start fedsched-sim-torch (the LibTorch build beside "
          "fedsched-sim) on every rank");
    }
    ExecSibling("fedsched-sim", "fedsched-sim-torch", argv);
  }
#endif
  return absl::OkStatus();
}

// The learner of a run on this process alone: fedsched's training code (TrainingLearner).
absl::StatusOr<std::unique_ptr<Learner>> LocalLearner(const v1::SimConfig& resolved) {
  absl::StatusOr<std::unique_ptr<TrainingLearner>> l =
      TrainingLearner::Create(resolved, Trainers());
  if (!l.ok()) return l.status();
  return std::unique_ptr<Learner>(*std::move(l));
}

// The run's setup on stderr: effective config, ranks, traces, policies, clients with data.
void PrintSetup(const Simulation& sim, const mpi::Cluster* cluster) {
  const v1::SimConfig& c = sim.config;
  std::fprintf(stderr, "fedsched-sim effective config:\n%s", ConfigToText(c).c_str());
  if (cluster != nullptr) {
    std::fprintf(stderr, "MPI: %d ranks%s\n", cluster->size(),
                 c.no_train() ? " (no_train: nothing to spread, rank 0 runs alone)"
                              : "; each trains the clients k with k mod ranks = its rank");
  }
  std::fprintf(
      stderr, "capacity: %s (%lld rows)\navailability: %s (%lld rows, mean online %.1f %%)\n",
      sim.capacity->source().c_str(), static_cast<long long>(sim.capacity->size()),
      sim.availability->description().c_str(), static_cast<long long>(sim.availability->size()),
      100.0 * sim.availability->MeanOnlineFraction());
  std::fprintf(stderr, "selection: %s, cache: %s, availability forecast: %s%s\n",
               PolicyName(c.server().selection().policy()).c_str(),
               CachePolicyNameOf(c.server().cache()).c_str(),
               ForecastName(c.availability_forecast()).c_str(),
               c.no_train() ? "; no_train: accuracy and loss come from the modelled curve "
                              "(config `curve`), no model is trained"
                            : "");
  for (const std::string& w : sim.availability->warnings()) {
    std::fprintf(stderr, "WARNING: availability trace: %s\n", w.c_str());
  }
  int64_t with_data = 0;
  for (int32_t k = 0; k < c.num_clients(); ++k) with_data += sim.learner->NumSamples(k) > 0;
  std::fprintf(stderr, "clients with local data: %lld of %d\n", static_cast<long long>(with_data),
               c.num_clients());
  const v1::SyntheticAvailabilityConfig& synthetic = c.traces().synthetic();
  if (synthetic.has_grouped() && synthetic.grouped().label_skew_by_group()) {
    std::fprintf(stderr, "%s\n",
                 c.no_train() ? "WARNING: label_skew_by_group has no effect in no_train mode"
                              : "label skew by group: the groups online least hold the lowest "
                                "labels");
  }
}

// The run's summary line on stdout (setup and run wall seconds as measured by Run).
void PrintSummary(const Simulation& sim, const RunSummary& summary, double setup_s, double run_s) {
  const v1::SimConfig& c = sim.config;
  // In no-train mode the accuracy is the modelled curve's (ModelledCurveConfig), not a
  // measurement of any model.
  std::printf(
      "run=%s policy=%s cache=%s forecast=%s seed=%llu rounds_committed=%lld rounds_failed=%lld "
      "virtual_h=%.3f final_accuracy=%.4f%s time_to_target_h=%s events=%llu setup_wall_s=%.2f "
      "run_wall_s=%.2f events_per_s=%.0f tasks_started=%lld oom_failures=%lld stop=\"%s\"\n",
      sim.run_name.c_str(), PolicyName(c.server().selection().policy()).c_str(),
      CachePolicyNameOf(c.server().cache()).c_str(),
      ForecastName(c.availability_forecast()).c_str(),
      static_cast<unsigned long long>(c.server().seed()),
      static_cast<long long>(summary.rounds_committed),
      static_cast<long long>(summary.rounds_failed), summary.virtual_s / 3600.0,
      summary.final_accuracy, c.no_train() ? " accuracy_source=modelled_curve(no_train)" : "",
      summary.time_to_target_s < 0 ? "never"
                                   : std::to_string(summary.time_to_target_s / 3600.0).c_str(),
      static_cast<unsigned long long>(summary.events), setup_s, run_s,
      run_s > 0 ? summary.events / run_s : 0.0, static_cast<long long>(summary.tasks_started),
      static_cast<long long>(summary.oom_failures), summary.stop_reason.c_str());
}

// --plot_png of the run's CSV (written and closed before). Errors: PlotAccuracy's.
absl::Status PlotRun(const Simulation& sim) {
  const v1::SimConfig& c = sim.config;
  std::string title = absl::GetFlag(FLAGS_plot_title);
  if (title.empty()) {
    // Two lines that fit the 1000-pixel image: the run, then its config and trace files.
    const auto base = [](const std::string& path) {
      return std::filesystem::path(path).filename().string();
    };
    title =
        absl::StrCat(sim.run_name, ": policy ", PolicyName(c.server().selection().policy()),
                     ", cache ", CachePolicyNameOf(c.server().cache()), ", seed ",
                     c.server().seed(), "\nconfig ", absl::GetFlag(FLAGS_config), ", traces ",
                     base(c.traces().capacity_path()), ", ", base(c.traces().availability_path()));
  }
  return PlotAccuracy(
      absl::GetFlag(FLAGS_plot_png), {{sim.run_name, c.output_csv()}},
      absl::GetFlag(FLAGS_target) > 0 ? absl::GetFlag(FLAGS_target) : c.target_accuracy(), title);
}

// Runs `sim` into its CSV (when output_csv is set; closed on return, so that it is complete)
// and the progress line (unless quiet); `*run_s` gets the run's wall seconds. Errors:
// CsvRoundWriter::Open's and the simulator's.
absl::StatusOr<RunSummary> RunToSinks(Simulation& sim, double* run_s) {
  const v1::SimConfig& c = sim.config;
  std::vector<RoundSink*> sinks;
  std::unique_ptr<CsvRoundWriter> csv;
  if (!c.output_csv().empty()) {
    FEDSCHED_ASSIGN_OR_RETURN(csv, CsvRoundWriter::Open(c.output_csv(), sim.run_name));
    sinks.push_back(csv.get());
  }
  ProgressLine progress(sim.run_name, c.server().num_rounds());
  if (!c.quiet()) sinks.push_back(&progress);
  TeeSink tee(sinks);
  const absl::Time run_start = absl::Now();
  absl::StatusOr<RunSummary> summary = sim.simulator->Run(&tee);
  *run_s = absl::ToDoubleSeconds(absl::Now() - run_start);
  if (!c.quiet()) progress.Finish();
  return summary;
}

// A job simulation's per-round CSVs, one per job beside output_csv (JobCsvPath), when
// output_csv is set. Errors: CsvRoundWriter::Open's; INVALID_ARGUMENT when output_csv is a job's
// CSV.
absl::StatusOr<std::vector<std::unique_ptr<CsvRoundWriter>>> OpenJobCsvs(const JobSimulation& sim) {
  std::vector<std::unique_ptr<CsvRoundWriter>> writers;
  const std::string& summary_csv = sim.config().output_csv();
  if (summary_csv.empty()) return writers;
  for (const v1::JobArrival& job : sim.trace().jobs()) {
    const std::string path = JobCsvPath(summary_csv, job.spec().name());
    if (std::filesystem::path(path) == std::filesystem::path(summary_csv)) {
      return absl::InvalidArgumentError(
          absl::StrCat("output_csv ", summary_csv, " (the JCT summary) is also job ",
                       job.spec().name(), "'s CSV; name it otherwise"));
    }
    FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<CsvRoundWriter> w,
                              CsvRoundWriter::Open(path, job.spec().name()));
    writers.push_back(std::move(w));
  }
  return writers;
}

// --plot_png of a job simulation: one curve per job CSV.
absl::Status PlotJobs(const JobSimulation& sim) {
  std::vector<std::pair<std::string, std::string>> curves;
  for (const v1::JobArrival& job : sim.trace().jobs()) {
    curves.emplace_back(job.spec().name(),
                        JobCsvPath(sim.config().output_csv(), job.spec().name()));
  }
  std::string title = absl::GetFlag(FLAGS_plot_title);
  if (title.empty()) title = absl::StrCat("jobs of ", sim.config().job_trace_path());
  return PlotAccuracy(absl::GetFlag(FLAGS_plot_png), curves, absl::GetFlag(FLAGS_target), title);
}

// The run of a config with a job_trace_path (docs/guides/JOBS.md "Simulating jobs"): every job over
// the one fleet; the JCT table on stdout and, with output_csv, the JCT summary there and each
// job's per-round CSV beside it.
absl::Status RunJobs(const v1::SimConfig& config) {
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<JobSimulation> sim,
                            JobSimulation::Create(config, LearnerFactory(LocalLearner)));
  std::fprintf(stderr, "fedsched-sim: %d jobs from %s over %d clients; matcher %s\n",
               sim->trace().jobs_size(), sim->config().job_trace_path().c_str(),
               sim->config().num_clients(),
               sim->config().server().jobs().matcher().empty()
                   ? "fifo"
                   : sim->config().server().jobs().matcher().c_str());
  absl::StatusOr<JobsSummary> summary;
  {
    FEDSCHED_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<CsvRoundWriter>> writers,
                              OpenJobCsvs(*sim));
    std::vector<RoundSink*> sinks;
    for (const auto& w : writers) sinks.push_back(w.get());
    const absl::Time start = absl::Now();
    summary = sim->Run(sinks);
    std::fprintf(stderr, "fedsched-sim: run took %.2f s of wall time\n",
                 absl::ToDoubleSeconds(absl::Now() - start));
  }  // the job CSVs are complete
  if (!summary.ok()) return summary.status();
  std::printf("%s", JctTable(*summary).c_str());
  if (!sim->config().output_csv().empty()) {
    FEDSCHED_RETURN_IF_ERROR(WriteFileAtomically(sim->config().output_csv(), JctCsv(*summary)));
  }
  if (!absl::GetFlag(FLAGS_plot_png).empty() && !sim->config().output_csv().empty()) {
    FEDSCHED_RETURN_IF_ERROR(PlotJobs(*sim));
  }
  return absl::OkStatus();
}

// The simulation (rank 0 of a distributed run: `cluster` non-null, its other ranks train);
// `argv` as main received it.
int Run(mpi::Cluster* cluster, char** argv) {
  if (!absl::GetFlag(FLAGS_plot_csvs).empty()) return PlotOnly();
  absl::StatusOr<v1::SimConfig> config = LoadConfig();
  if (!config.ok()) return Fail(config.status());
  if (!absl::GetFlag(FLAGS_availability_profile_csv).empty()) return ProfileOnly(*config);
  if (absl::Status s = HandOverTorchRun(*config, cluster, argv); !s.ok()) return Fail(s);
  if (!config->job_trace_path().empty()) {
    if (cluster != nullptr) {
      return Fail(absl::FailedPreconditionError(
          "a job simulation (job_trace_path) runs on one process; start it without mpirun"));
    }
    absl::Status s = RunJobs(*config);
    return s.ok() ? 0 : Fail(s);
  }
  const absl::Time wall_start = absl::Now();
  absl::StatusOr<std::unique_ptr<Simulation>> sim = BuildSimulation(
      *config, cluster != nullptr ? cluster->learner_factory() : LearnerFactory(LocalLearner));
  if (!sim.ok()) return Fail(sim.status());
  PrintSetup(**sim, cluster);
  const double setup_s = absl::ToDoubleSeconds(absl::Now() - wall_start);
  double run_s = 0;
  absl::StatusOr<RunSummary> summary = RunToSinks(**sim, &run_s);
  if (!summary.ok()) return Fail(summary.status());
  PrintSummary(**sim, *summary, setup_s, run_s);
  if (!absl::GetFlag(FLAGS_plot_png).empty() && !(*sim)->config.output_csv().empty()) {
    if (absl::Status s = PlotRun(**sim); !s.ok()) return Fail(s);
  }
  return 0;
}

int Main(int argc, char** argv) {
  absl::StatusOr<std::unique_ptr<mpi::Cluster>> cluster = mpi::Cluster::Join(&argc, &argv);
  if (!cluster.ok()) return Fail(cluster.status());
  absl::ParseCommandLine(argc, argv);
  SetTraceLimits({.max_file_bytes = absl::GetFlag(FLAGS_max_trace_bytes),
                  .max_rows = absl::GetFlag(FLAGS_max_trace_rows),
                  .max_windows = absl::GetFlag(FLAGS_max_trace_windows)});
  if (*cluster == nullptr) return Run(nullptr, argv);
  (*cluster)->set_trainer_factory(Trainers());
  if ((*cluster)->rank() > 0) {
    if (absl::Status s = (*cluster)->Serve(); !s.ok()) (*cluster)->Abort(s);
    return 0;
  }
  const int rc = Run(cluster->get(), argv);
  if (absl::Status s = (*cluster)->StopWorkers(); !s.ok()) (*cluster)->Abort(s);
  return rc;
}

}  // namespace
}  // namespace fedsched::sim

int main(int argc, char** argv) {
  fedsched::SetUsage(
      "fedsched simulator: replays device traces through the server's round engine (planner,\n"
      "closing, aggregation), with real training; --config=FILE (configs/sim/*.textproto);\n"
      "under `mpirun -np R` the training is spread over R ranks (the same CSV); a config with\n"
      "job_trace_path runs a job trace over one fleet (docs/guides/SIMULATION.md \"Jobs\")");
  // The trace readers turn an allocation failure into an error; anything else that runs out of
  // memory (a huge population or model) ends with a message, not an abort.
  try {
    return fedsched::sim::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "fedsched-sim: out of memory; reduce the population, the traces or the model "
                 "(see --max_trace_rows, --max_trace_windows)\n");
    return 1;
  }
}

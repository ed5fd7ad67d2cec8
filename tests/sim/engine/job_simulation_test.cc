// Simulating jobs (sim/engine/job_simulation.h): the shipped three-job trace runs to completion,
// its JCT summary is the same for a seed, both baseline matchers give complete summaries, a
// one-job trace has the whole fleet, devices train one job's task at a time, and bad traces are
// refused naming the field.
#include "sim/engine/job_simulation.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "sim/engine/device_labels.h"
#include "sim/engine/job_output.h"
#include "sim/engine/output.h"
#include "sim/engine/setup.h"
#include "tests/sim/engine/tiny_training_config.h"

namespace fedsched::sim {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

// The shipped example: configs/sim/three_jobs.textproto (and its job trace).
v1::SimConfig ThreeJobs() {
  absl::StatusOr<v1::SimConfig> c =
      LoadSimConfig(SourceDir() + "/configs/sim/three_jobs.textproto");
  EXPECT_TRUE(c.ok()) << c.status();
  c->set_quiet(true);
  return *c;
}

// Collects each round's CSV line.
class Lines : public RoundSink {
 public:
  void OnRound(const RoundRow& row) override { lines.push_back(RoundCsvLine("job", row)); }
  std::vector<std::string> lines;
};

struct Outcome {
  JobsSummary summary;
  std::vector<std::vector<std::string>> rounds;  // per job
};

absl::StatusOr<Outcome> RunJobs(const v1::SimConfig& config) {
  absl::StatusOr<std::unique_ptr<JobSimulation>> sim = JobSimulation::Create(config);
  if (!sim.ok()) return sim.status();
  std::vector<Lines> lines((*sim)->trace().jobs_size());
  std::vector<RoundSink*> sinks;
  for (Lines& l : lines) sinks.push_back(&l);
  absl::StatusOr<JobsSummary> summary = (*sim)->Run(sinks);
  if (!summary.ok()) return summary.status();
  Outcome out{*summary, {}};
  for (Lines& l : lines) out.rounds.push_back(l.lines);
  return out;
}

// Every job of `trace` committed its spec's rounds, after it arrived, in order of times.
void ExpectComplete(const JobsSummary& summary, const v1::JobTrace& trace) {
  ASSERT_EQ(summary.jobs.size(), static_cast<size_t>(trace.jobs_size()));
  for (int i = 0; i < trace.jobs_size(); ++i) {
    const JobOutcome& o = summary.jobs[i];
    SCOPED_TRACE(o.name);
    EXPECT_EQ(o.name, trace.jobs(i).spec().name());
    EXPECT_EQ(o.arrival_s, trace.jobs(i).arrival_s());
    EXPECT_EQ(o.rounds, trace.jobs(i).spec().num_rounds());
    EXPECT_EQ(o.stop_reason,
              absl::StrCat("completed ", trace.jobs(i).spec().num_rounds(), " rounds"));
    EXPECT_GE(o.start_s, o.arrival_s);
    EXPECT_GT(o.end_s, o.start_s);
    EXPECT_GT(o.jct_s(), 0);
    EXPECT_GT(o.final_accuracy, 0);
  }
}

// (Every completed run also shows that no device was given two jobs' tasks at once: the
// simulator's DeviceOccupancy::Begin would have failed it with INTERNAL.)
TEST(JobSimulationTest, ThreeJobTraceIsDeterministicForASeed) {
  const v1::SimConfig config = ThreeJobs();
  ASSERT_OK_AND_ASSIGN(Outcome first, RunJobs(config));
  ASSERT_OK_AND_ASSIGN(Outcome second, RunJobs(config));
  ASSERT_OK_AND_ASSIGN(v1::JobTrace trace, LoadJobTrace(config.job_trace_path()));
  ExpectComplete(first.summary, trace);
  EXPECT_EQ(JctCsv(first.summary), JctCsv(second.summary));
  EXPECT_EQ(JctTable(first.summary), JctTable(second.summary));
  EXPECT_EQ(first.rounds, second.rounds);
  for (int i = 0; i < trace.jobs_size(); ++i) {
    const auto committed = std::count_if(
        first.rounds[i].begin(), first.rounds[i].end(),
        [](const std::string& line) { return line.find(",committed,") != std::string::npos; });
    EXPECT_EQ(committed, trace.jobs(i).spec().num_rounds());
  }
  // Another seed gives other rounds (the matcher, the jobs without a seed of their own).
  v1::SimConfig other = config;
  other.mutable_server()->set_seed(7);
  ASSERT_OK_AND_ASSIGN(Outcome reseeded, RunJobs(other));
  ExpectComplete(reseeded.summary, trace);
  EXPECT_NE(JctCsv(first.summary), JctCsv(reseeded.summary));
}

TEST(JobSimulationTest, FifoAndRandomMatchersGiveCompleteSummaries) {
  for (const std::string matcher : {"fifo", "random"}) {
    SCOPED_TRACE(matcher);
    v1::SimConfig config = ThreeJobs();
    config.mutable_server()->mutable_jobs()->set_matcher(matcher);
    ASSERT_OK_AND_ASSIGN(Outcome out, RunJobs(config));
    ASSERT_OK_AND_ASSIGN(v1::JobTrace trace, LoadJobTrace(config.job_trace_path()));
    EXPECT_EQ(out.summary.matcher, matcher);
    ExpectComplete(out.summary, trace);
    const JctStats stats = ComputeJctStats(out.summary);
    EXPECT_EQ(stats.completed, 3);
    EXPECT_GT(stats.mean_s, 0);
    EXPECT_GT(stats.median_s, 0);
    EXPECT_THAT(JctTable(out.summary), HasSubstr(absl::StrCat("matcher ", matcher)));
    // The CSV: a header and one line per job, each naming the matcher.
    const std::string csv = JctCsv(out.summary);
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4);
    EXPECT_THAT(csv, HasSubstr(absl::StrCat("\n", matcher, ",mlp-k5,300.000,")));
  }
}

// Writes `trace` as text next to the test's temporary files and points `config` at it.
std::string WriteTrace(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(JobSimulationTest, JobsAreStartedOnlyAtTheirArrival) {
  v1::SimConfig config = ThreeJobs();
  config.set_job_trace_path(WriteTrace("late.textproto", R"pb(
    jobs {
      arrival_s: 3600
      spec {
        name: "late"
        model { architecture: "softmax" }
        clients_per_round: 5
        num_rounds: 3
      }
    }
  )pb"));
  ASSERT_OK_AND_ASSIGN(Outcome out, RunJobs(config));
  ASSERT_EQ(out.summary.jobs.size(), 1u);
  EXPECT_GE(out.summary.jobs[0].start_s, 3600);
  EXPECT_EQ(out.summary.jobs[0].rounds, 3);
}

TEST(JobSimulationTest, AJobEndsAtItsTargetAccuracyWhileTheOthersRunOn) {
  v1::SimConfig config = ThreeJobs();
  config.set_job_trace_path(WriteTrace("target.textproto", R"pb(
    jobs {
      spec {
        name: "quick"
        model { architecture: "softmax" }
        clients_per_round: 5
        target_accuracy: 0.2
      }
    }
    jobs {
      spec {
        name: "long"
        model { architecture: "mlp" }
        clients_per_round: 5
        num_rounds: 30
      }
    }
  )pb"));
  ASSERT_OK_AND_ASSIGN(Outcome out, RunJobs(config));
  ASSERT_EQ(out.summary.jobs.size(), 2u);
  const JobOutcome& quick = out.summary.jobs[0];
  EXPECT_EQ(quick.stop_reason, "reached target accuracy 0.2");
  EXPECT_GE(quick.final_accuracy, 0.2);
  EXPECT_LT(quick.rounds, 30);
  EXPECT_EQ(out.summary.jobs[1].rounds, 30);
  EXPECT_GT(out.summary.jobs[1].end_s, quick.end_s);
}

// One job alone has the whole fleet: its rounds are those of the same settings run as the
// config's own (without stragglers: a one-job trace does not re-plan a device at the instant its
// straggler task is let go, while the single run does, though that device is still training).
TEST(JobSimulationTest, OneJobAloneRunsAsTheConfigsOwnRun) {
  v1::SimConfig config = ThreeJobs();
  config.set_model_bytes(40000);
  const std::string spec_text = R"pb(
    name: "solo"
    model { architecture: "softmax" }
    clients_per_round: 10
    num_rounds: 12
    round_deadline_s: 600
    training { batch_size: 20 local_steps: 5 }
    selection { policy: SELECTION_POLICY_RANDOM overcommit: 1.0 }
  )pb";
  config.set_job_trace_path(
      WriteTrace("solo.textproto", absl::StrCat("jobs { spec { ", spec_text, " } }")));
  ASSERT_OK_AND_ASSIGN(Outcome jobs, RunJobs(config));

  // The job's own config, run alone as a config without jobs.
  v1::JobSpec spec;
  ASSERT_OK(ParseTextConfig(spec_text, "spec", &spec));
  ASSERT_OK_AND_ASSIGN(v1::SimConfig single, JobSimConfig(config, spec));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Simulation> sim, BuildSimulation(single));
  Lines lines;
  ASSERT_OK_AND_ASSIGN(RunSummary summary, sim->simulator->Run(&lines));
  EXPECT_EQ(summary.rounds_committed, 12);
  EXPECT_EQ(jobs.rounds.at(0), lines.lines);
}

TEST(JobSimulationTest, TheVirtualTimeLimitEndsEveryJob) {
  v1::SimConfig config = ThreeJobs();
  config.set_max_virtual_hours(0.05);  // 180 s: the third job never arrives
  ASSERT_OK_AND_ASSIGN(Outcome out, RunJobs(config));
  ASSERT_EQ(out.summary.jobs.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(out.summary.jobs[i].end_s, 180);
    EXPECT_EQ(out.summary.jobs[i].stop_reason, "virtual time limit 180 s");
    EXPECT_LT(out.summary.jobs[i].rounds, 20);
  }
  EXPECT_EQ(out.summary.jobs[2].end_s, -1);
  EXPECT_EQ(out.summary.jobs[2].jct_s(), -1);
  EXPECT_THAT(out.summary.jobs[2].stop_reason, HasSubstr("did not arrive"));
  EXPECT_EQ(ComputeJctStats(out.summary).completed, 2);
  EXPECT_THAT(JctTable(out.summary), HasSubstr("over 2 of 3 jobs"));
}

TEST(JobSimulationTest, BadTracesAreRefusedNamingTheField) {
  const struct {
    std::string text;
    std::string message;
  } cases[] = {
      {"", "no jobs"},
      {R"pb(jobs { spec { name: "Bad Name" num_rounds: 1 } })pb", "jobs[0].spec.name"},
      {R"pb(jobs {
              arrival_s: -1
              spec { name: "a" num_rounds: 1 }
            })pb",
       "jobs[0].arrival_s"},
      {R"pb(jobs { spec { name: "a" } })pb", "jobs[0].spec.num_rounds"},
      {R"pb(jobs { spec { name: "a" num_rounds: 1 } }
            jobs { spec { name: "a" num_rounds: 1 } })pb",
       "jobs[1].spec.name: \"a\" is used twice"},
      {R"pb(jobs {
              spec {
                name: "a"
                num_rounds: 1
                population { required_labels: "lang:en" }
              }
            })pb",
       "jobs[0].spec.population.required_labels"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_THAT(LoadJobTrace(WriteTrace("bad.textproto", c.text)),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)));
  }
}

// Label rules: a device declares a label when its attribute reaches the rule's quantile.
TEST(DeviceLabelsTest, RulesLabelTheTopQuantileOfTheFleet) {
  v1::SimConfig c;
  v1::DeviceLabelRule* fast = c.add_device_label_rules();
  fast->set_label("fast-compute");
  fast->set_attribute(v1::DEVICE_ATTRIBUTE_COMPUTE_SPEED);
  fast->set_min_quantile(0.5);
  v1::DeviceLabelRule* big = c.add_device_label_rules();
  big->set_label("big-data");
  big->set_attribute(v1::DEVICE_ATTRIBUTE_DATA_KB);
  big->set_min_quantile(0.75);
  ASSERT_OK(CheckDeviceLabelRules(c.device_label_rules()));
  // ms per sample 10, 20, 30, 40 (fastest first); data 1x1, 2x1, 3x1, 4x2 KB.
  const std::vector<DeviceAttributes> devices = {
      {10, 100, 1, 1}, {20, 100, 2, 1}, {30, 100, 3, 1}, {40, 100, 4, 2}};
  const std::vector<std::vector<std::string>> labels =
      LabelDevices(c.device_label_rules(), devices);
  ASSERT_EQ(labels.size(), 4u);
  EXPECT_EQ(labels[0], std::vector<std::string>({"fast-compute"}));
  EXPECT_EQ(labels[1], std::vector<std::string>({"fast-compute"}));
  EXPECT_TRUE(labels[2].empty());
  EXPECT_EQ(labels[3], std::vector<std::string>({"big-data"}));
  EXPECT_EQ(RuleLabels(c.device_label_rules()),
            std::vector<std::string>({"big-data", "fast-compute"}));
  // Ties at the threshold all get the label; quantile 0 labels everyone.
  big->set_attribute(v1::DEVICE_ATTRIBUTE_BANDWIDTH);
  for (const auto& l : LabelDevices(c.device_label_rules(), devices)) {
    EXPECT_NE(std::find(l.begin(), l.end(), "big-data"), l.end());
  }
  big->set_min_quantile(1.0);
  EXPECT_THAT(CheckDeviceLabelRules(c.device_label_rules()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("device_label_rules[1].min_quantile")));
  big->set_min_quantile(0.5);
  big->clear_attribute();
  EXPECT_THAT(
      CheckDeviceLabelRules(c.device_label_rules()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device_label_rules[1].attribute")));
  big->set_attribute(v1::DEVICE_ATTRIBUTE_NUM_SAMPLES);
  big->clear_label();
  EXPECT_THAT(
      CheckDeviceLabelRules(c.device_label_rules()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device_label_rules[1].label")));
}

// A config whose devices are labelled fast-compute (top half by compute speed) and fast-link
// (top half by bandwidth), running `trace_text`.
v1::SimConfig Labelled(const std::string& name, const std::string& trace_text) {
  v1::SimConfig config = ThreeJobs();
  for (const auto& [label, attribute] :
       {std::pair{"fast-compute", v1::DEVICE_ATTRIBUTE_COMPUTE_SPEED},
        std::pair{"fast-link", v1::DEVICE_ATTRIBUTE_BANDWIDTH}}) {
    v1::DeviceLabelRule* rule = config.add_device_label_rules();
    rule->set_label(label);
    rule->set_attribute(attribute);
    rule->set_min_quantile(0.5);
  }
  config.set_job_trace_path(WriteTrace(name, trace_text));
  return config;
}

TEST(JobSimulationTest, JobsRequiringRuleLabelsRunOnTheLabelledDevices) {
  const v1::SimConfig config = Labelled("labelled.textproto", R"pb(
    jobs {
      spec {
        name: "general"
        model { architecture: "softmax" }
        clients_per_round: 5
        num_rounds: 4
      }
    }
    jobs {
      spec {
        name: "fast"
        model { architecture: "softmax" }
        clients_per_round: 5
        num_rounds: 4
        population { required_labels: "fast-compute" required_labels: "fast-link" }
      }
    }
  )pb");
  ASSERT_OK_AND_ASSIGN(Outcome out, RunJobs(config));
  ASSERT_OK_AND_ASSIGN(v1::JobTrace trace,
                       LoadJobTrace(config.job_trace_path(), {"fast-compute", "fast-link"}));
  ExpectComplete(out.summary, trace);
  for (const JobOutcome& o : out.summary.jobs) {
    EXPECT_GE(o.max_wait_s, 0);
    EXPECT_EQ(o.starved, 0);  // no starvation bound set
  }
  EXPECT_THAT(JctCsv(out.summary), HasSubstr("final_accuracy,max_wait_s,starved,stop_reason\n"));
}

TEST(JobSimulationTest, ALabelNoRuleGivesIsRefused) {
  const v1::SimConfig config = Labelled("unknown_label.textproto", R"pb(
    jobs {
      spec {
        name: "a"
        num_rounds: 1
        population { required_labels: "big-data" }
      }
    }
  )pb");
  EXPECT_THAT(JobSimulation::Create(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("jobs[0].spec.population.required_labels: no "
                                 "device_label_rules gives \"big-data\" (they give "
                                 "fast-compute, fast-link)")));
  // A bad rule is refused before the trace is read.
  v1::SimConfig bad = config;
  bad.mutable_device_label_rules(0)->set_min_quantile(-0.1);
  EXPECT_THAT(JobSimulation::Create(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("device_label_rules[0].min_quantile")));
}

TEST(JobSimulationTest, AJobsSpecSettingsAreResolvedAsTheSimulatorsConfig) {
  v1::SimConfig raw = ThreeJobs();
  raw.mutable_server()->set_seed(9);
  v1::JobSpec spec;
  spec.set_name("j");
  spec.mutable_model()->set_architecture("softmax");
  spec.set_clients_per_round(4);
  spec.set_num_rounds(2);
  spec.set_target_accuracy(0.5);
  ASSERT_OK_AND_ASSIGN(v1::SimConfig c, JobSimConfig(raw, spec));
  EXPECT_EQ(c.run_name(), "j");
  EXPECT_TRUE(c.job_trace_path().empty());
  EXPECT_EQ(c.server().clients_per_round(), 4);
  EXPECT_EQ(c.server().num_rounds(), 2);
  EXPECT_EQ(c.server().seed(), 9u);  // the simulation's, as the spec sets none
  EXPECT_EQ(c.target_accuracy(), 0.5);
  EXPECT_GT(c.model_bytes(), 7850 * 4);  // the softmax model's 7,850 floats
  EXPECT_LT(c.model_bytes(), 407080);
  spec.set_seed(3);
  spec.set_clients_per_round(1000);
  EXPECT_THAT(JobSimConfig(raw, spec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("job j: sim config: server.clients_per_round")));
}

TEST(JobSimulationTest, JobCsvsGoBesideTheSummary) {
  EXPECT_EQ(JobCsvPath("runs/jct.csv", "mlp-k5"), "runs/mlp-k5.csv");
  EXPECT_EQ(JobCsvPath("jct.csv", "a"), "a.csv");
}

TEST(DeviceOccupancyTest, ADeviceHoldsOneJobsTasksAtATime) {
  DeviceOccupancy occupancy(3);
  ASSERT_OK(occupancy.Begin(1, 0));
  ASSERT_OK(occupancy.Begin(1, 0));  // a straggler and a new task of the same job
  EXPECT_TRUE(occupancy.BusyElsewhere(1, 1));
  EXPECT_FALSE(occupancy.BusyElsewhere(1, 0));
  EXPECT_FALSE(occupancy.BusyElsewhere(2, 1));
  EXPECT_THAT(occupancy.Begin(1, 1), StatusIs(absl::StatusCode::kInternal, HasSubstr("job #0")));
  occupancy.End(1, 0);
  EXPECT_TRUE(occupancy.BusyElsewhere(1, 1));
  occupancy.End(1, 0);
  EXPECT_FALSE(occupancy.BusyElsewhere(1, 1));
  ASSERT_OK(occupancy.Begin(1, 1));
  ASSERT_OK(occupancy.Begin(2, 1));
  occupancy.ReleaseJob(1);
  EXPECT_FALSE(occupancy.BusyElsewhere(1, 0));
  EXPECT_FALSE(occupancy.BusyElsewhere(2, 0));
  occupancy.End(2, 1);  // a released job's task ending changes nothing
  EXPECT_FALSE(occupancy.BusyElsewhere(2, 0));
}

}  // namespace
}  // namespace fedsched::sim

// Resource fit in the simulator (docs/guides/RESOURCE_FIT.md "Simulation"): budgets are drawn as
// documented and deterministically; tasks over budget fail out of memory; fit checks in the
// planner remove most of those failures.
#include "sim/engine/device_budgets.h"

#include <cstdlib>
#include <set>
#include <string>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "sim/engine/setup.h"
#include "sim/engine/simulator.h"

namespace fedsched::sim {
namespace {

std::string SourceDir() {
  const char* src = std::getenv("FEDSCHED_SOURCE_DIR");
  return src != nullptr ? src : "/work/main";
}

TEST(DeviceBudgetsTest, DefaultsAndDeterministicDraws) {
  v1::DeviceBudgetConfig in;
  in.set_enable(true);
  ASSERT_OK_AND_ASSIGN(v1::DeviceBudgetConfig c, ResolveDeviceBudgets(in));
  EXPECT_EQ(c.tiers_size(), 5);
  EXPECT_DOUBLE_EQ(c.min_fraction(), 0.01);
  EXPECT_DOUBLE_EQ(c.max_fraction(), 0.04);
  const DeviceBudgets budgets(c);
  std::set<std::string> models;
  for (int32_t client = 0; client < 500; ++client) {
    const DeviceBudget b = budgets.ForClient(client, "");
    models.insert(b.device_model);
    // 2-8 GB x 1-4 %.
    EXPECT_GE(b.memory_budget_bytes, static_cast<int64_t>(2e9 * 0.01) - 1);
    EXPECT_LE(b.memory_budget_bytes, static_cast<int64_t>(8e9 * 0.04));
    EXPECT_GT(b.peak_factor, 0);
    const DeviceBudget again = budgets.ForClient(client, "");
    EXPECT_EQ(again.memory_budget_bytes, b.memory_budget_bytes);
    EXPECT_EQ(again.device_model, b.device_model);
  }
  EXPECT_EQ(models.size(), 40u);
  // Devices of one model share its factor; a trace's model name is kept.
  EXPECT_EQ(budgets.ForClient(1, "SM-A207F").peak_factor,
            budgets.ForClient(2, "SM-A207F").peak_factor);
  EXPECT_EQ(budgets.ForClient(1, "SM-A207F").device_model, "SM-A207F");
  v1::DeviceBudgetConfig bad = in;
  bad.set_min_fraction(0.5);
  bad.set_max_fraction(0.1);
  EXPECT_FALSE(ResolveDeviceBudgets(bad).ok());
}

// A small no-train fleet with budgets tight enough that many devices cannot train the batch:
// without fit checks many tasks fail out of memory; with them at least 90 % fewer do.
v1::SimConfig BudgetConfig(bool fit_checks) {
  v1::SimConfig c;
  c.set_num_clients(400);
  c.set_no_train(true);
  c.set_quiet(true);
  c.set_model_bytes(4'720'800);
  v1::ServerConfig* s = c.mutable_server();
  s->set_clients_per_round(10);
  s->set_num_rounds(30);
  s->set_seed(3);
  s->mutable_training()->set_batch_size(20);
  s->mutable_training()->set_local_steps(5);
  s->mutable_model()->set_architecture("cnn");
  s->mutable_selection()->mutable_fit()->set_disable(!fit_checks);
  v1::DeviceBudgetConfig* b = c.mutable_budgets();
  b->set_enable(true);
  b->set_model_scale(60);
  const std::string traces = SourceDir() + "/data/traces/";
  c.mutable_traces()->set_capacity_path(traces + "fedscale/capacity_10k.csv");
  c.mutable_traces()->set_shuffle_capacity(true);
  c.mutable_traces()->set_availability_path(traces + "mobiperf/avl_events_300.csv");
  return c;
}

TEST(DeviceBudgetsTest, FitChecksRemoveMostOutOfMemoryFailures) {
  RunSummary with_fit;
  RunSummary without_fit;
  for (bool fit : {false, true}) {
    SCOPED_TRACE(fit);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Simulation> sim, BuildSimulation(BudgetConfig(fit)));
    ASSERT_OK_AND_ASSIGN(RunSummary s, sim->simulator->Run(nullptr));
    EXPECT_EQ(s.rounds_committed, 30);
    (fit ? with_fit : without_fit) = s;
  }
  EXPECT_GT(without_fit.oom_failures, 20);
  EXPECT_LE(with_fit.oom_failures * 10, without_fit.oom_failures);
}

}  // namespace
}  // namespace fedsched::sim

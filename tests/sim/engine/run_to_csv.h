// Runs a whole simulation for the simulator's tests and collects its rows (sim/engine/setup.h).
#ifndef FEDSCHED_TESTS_SIM_ENGINE_RUN_TO_CSV_H_
#define FEDSCHED_TESTS_SIM_ENGINE_RUN_TO_CSV_H_

#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/engine/output.h"
#include "sim/engine/setup.h"

namespace fedsched::sim {

// Builds `config`'s simulation (with `make_learner`, BuildSimulation's default when null), runs
// it and returns its CSV lines (run "x"); `rows` (may be null) gets every row. A failure is a
// test failure and returns "".
inline std::string RunToCsv(const v1::SimConfig& config, std::vector<RoundRow>* rows,
                            const LearnerFactory& make_learner = nullptr) {
  auto sim = BuildSimulation(config, make_learner);
  EXPECT_TRUE(sim.ok()) << sim.status();
  if (!sim.ok()) return "";
  struct Lines : RoundSink {
    void OnRound(const RoundRow& r) override {
      out << RoundCsvLine("x", r) << "\n";
      rows.push_back(r);
    }
    std::ostringstream out;
    std::vector<RoundRow> rows;
  } lines;
  auto summary = (*sim)->simulator->Run(&lines);
  EXPECT_TRUE(summary.ok()) << summary.status();
  if (rows != nullptr) *rows = lines.rows;
  return lines.out.str();
}

}  // namespace fedsched::sim

#endif  // FEDSCHED_TESTS_SIM_ENGINE_RUN_TO_CSV_H_

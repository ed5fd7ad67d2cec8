// Golden test against the authors' Oort selector: tests/data/golden/oort_*_clients.txt hold 30
// rounds of SymbioticLab/Oort's _training_selector (the files name the commit) on fixed clients:
// per selection its T, pacer percentile, every tried client's score, the tried clients at or
// above the cut-off, the exploited draw and epsilon. fedsched's formulas (scoring.h) and pacer
// (OortPacer), fed the same client states and the same exploited clients, must reproduce them:
// the scores to 1e-12, the eligible sets, T, the percentile and epsilon exactly. Then
// OortPolicy itself, fed the reference's own draws (numpy's choice and rng.choice picks, in
// order, through ScriptedDraws), must select exactly the reference's set, with the same clients
// exploited, every round.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "server/planner/candidate_pool.h"
#include "server/planner/oort_pacer.h"
#include "server/planner/oort_policy.h"
#include "server/planner/planner_options.h"
#include "server/planner/policy.h"
#include "server/planner/scoring.h"
#include "server/planner/workload.h"
#include "server/profile/profile_book.h"
#include "server/profile/round_time.h"
#include "tests/server/planner/scripted_draws.h"

namespace fedsched::planner {
namespace {

struct Arm {
  double reward = 0;
  double duration = 0;
  int64_t time_stamp = 0;
  int count = 0;
};

std::set<int> ReadIds(std::istringstream& in) {
  std::set<int> ids;
  int id;
  while (in >> id) ids.insert(id);
  return ids;
}

std::vector<int> ReadIdList(std::istringstream& in) {
  std::vector<int> ids;
  int id;
  while (in >> id) ids.push_back(id);
  return ids;
}

// An "update ID REWARD DURATION" line (the rest of `in`): the client's feedback after `round`;
// an exploited client's reward enters the pacer.
void ApplyUpdate(std::istringstream& in, int64_t round, const std::set<int>& exploited,
                 std::map<int, Arm>* arms, OortPacer* pacer) {
  int id;
  in >> id;
  Arm& a = (*arms)[id];
  in >> a.reward >> a.duration;
  a.time_stamp = round;
  ++a.count;
  if (exploited.contains(id)) pacer->RecordExploitedUtility(a.reward);
}

// Replays one golden file; returns the number of Oort selections checked.
int Replay(const std::string& name) {
  const std::string path = std::string(FEDSCHED_TESTDATA_DIR) + "/golden/" + name;
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << path;
  OortOptions o;  // FedScale's defaults, as the golden run
  o.pacer_step = 5;
  OortPacer pacer(o);
  std::map<int, Arm> arms;
  int k = 0;
  int64_t round = 0;
  bool all_tried_before = false;
  double eps_used = 0;
  std::map<int, double> scores;
  std::set<int> exploited;
  int selections = 0;
  auto finish_round = [&]() {
    if (round > 0) pacer.FinishRound(true);
  };
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string key;
    in >> key;
    SCOPED_TRACE(absl::StrCat(name, " round ", round, ": ", line.substr(0, 60)));
    if (key == "config") {
      std::string n;
      int clients;
      in >> n >> clients >> n >> k;
    } else if (key == "client") {
      int id;
      Arm a;
      in >> id >> a.reward >> a.duration;
      arms[id] = a;
    } else if (key == "round") {
      finish_round();
      in >> round;
      exploited.clear();
      scores.clear();
      pacer.BeginSelection(round);
      if (round == 1) continue;  // fedsched's uniform first round: no scores
      ++selections;
      pacer.DecayEpsilon();
      eps_used = pacer.epsilon();
      all_tried_before =
          std::all_of(arms.begin(), arms.end(), [](const auto& a) { return a.second.count > 0; });
      // The round's terms over every client (all are feasible in the golden run).
      std::vector<double> durations, rewards;
      double min_reward = INFINITY, max_reward = 0;
      for (const auto& [id, a] : arms) {
        durations.push_back(a.duration);
        if (a.reward > 0) {
          rewards.push_back(a.reward);
          min_reward = std::min(min_reward, a.reward);
          max_reward = std::max(max_reward, a.reward);
        }
      }
      OortRoundTerms terms;
      terms.round = round;
      terms.round_penalty = o.round_penalty;
      terms.preferred_duration_s =
          PercentileInPlace(absl::MakeSpan(durations), pacer.round_threshold_percent());
      terms.clip_utility = PercentileInPlace(absl::MakeSpan(rewards), 100.0 * o.clip_bound);
      terms.min_utility = min_reward;
      terms.max_utility = max_reward;
      pacer.set_preferred_duration_s(terms.preferred_duration_s);
      for (const auto& [id, a] : arms) {
        if (a.count > 0) scores[id] = OortScore(a.reward, a.duration, a.time_stamp, terms).score;
      }
    } else if (key == "T") {
      double t;
      in >> t;
      EXPECT_EQ(pacer.preferred_duration_s(), t);
    } else if (key == "threshold") {
      double p;
      in >> p;
      EXPECT_EQ(pacer.round_threshold_percent(), p);
    } else if (key == "score") {
      int id;
      double s;
      in >> id >> s;
      if (!scores.contains(id)) {
        ADD_FAILURE() << "no score for client " << id;
        continue;
      }
      EXPECT_NEAR(scores[id], s, 1e-12 * std::max(1.0, std::abs(s))) << id;
    } else if (key == "eps_after") {
      // Oort stops exploring once no client is left untried.
      if (all_tried_before) pacer.StopExploring();
      double e;
      in >> e;
      EXPECT_EQ(pacer.epsilon(), e);
    } else if (key == "eligible") {
      const std::set<int> want = ReadIds(in);
      // exploit_len from the decayed epsilon; cut-off at the next score after the best ones.
      std::vector<double> sorted;
      for (const auto& [id, s] : scores) sorted.push_back(s);
      std::sort(sorted.rbegin(), sorted.rend());
      const size_t exploit_len =
          std::min(sorted.size(), static_cast<size_t>(std::floor((1.0 - eps_used) * k)));
      const double cut = o.cut_off_util * sorted[std::min(exploit_len, sorted.size() - 1)];
      std::set<int> got;
      for (const auto& [id, s] : scores) {
        if (s >= cut) got.insert(id);
      }
      EXPECT_EQ(got, want);
    } else if (key == "exploited") {
      exploited = ReadIds(in);
    } else if (key == "update") {
      ApplyUpdate(in, round, exploited, &arms, &pacer);
    }
  }
  return selections;
}

TEST(OortGoldenTest, FiftyClients) { EXPECT_EQ(Replay("oort_50_clients.txt"), 29); }

TEST(OortGoldenTest, FourHundredClients) { EXPECT_EQ(Replay("oort_400_clients.txt"), 29); }

// Replays one golden file through OortPolicy::Fill with the reference's draws scripted; returns
// the number of rounds whose selected set was compared (30).
int ReplaySelection(const std::string& name) {
  const std::string path = std::string(FEDSCHED_TESTDATA_DIR) + "/golden/" + name;
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << path;
  PlannerOptions options;
  options.policy = v1::SELECTION_POLICY_OORT;
  options.overcommit = 1.0;
  options.oort.pacer_step = 5;  // as the golden run
  auto book = profile::ProfileBook::Create({.heartbeat_timeout_s = 1e9});
  EXPECT_TRUE(book.ok()) << book.status();
  OortPacer pacer(options.oort);
  OortPolicy policy(&pacer);
  CandidatePool pool;
  std::map<int, Arm> arms;
  std::vector<ClientIndex> candidates;
  int64_t round = 0;
  std::set<int> exploited;
  ScriptedDraws draws;
  std::set<int> chosen;
  std::set<int> chosen_exploited;
  int compared = 0;
  // One Oort selection of `round` with the draws scripted so far.
  auto select = [&]() {
    pool.BeginRound(arms.size());
    for (const auto& [id, a] : arms) {
      Candidate& c = pool.Add();
      c.index = static_cast<ClientIndex>(id);
      c.steps = 1;
      c.t_s = a.duration;
      c.utility = a.reward;
      c.tried = a.count > 0;
    }
    WithGoldenRound(options, **book, candidates, static_cast<size_t>(options.clients_per_round),
                    round, draws, [&](const RoundContext& context) {
                      RoundPlan plan;
                      policy.BeginRound();
                      policy.Fill(context, /*fits_only=*/false, &pool, &plan);
                    });
    chosen.clear();
    chosen_exploited.clear();
    for (uint32_t pos : pool.chosen()) {
      chosen.insert(static_cast<int>(pool[pos].index));
      // Once exploration stops, Oort's exploitClients aliases the list its uniform fill appends
      // to, so that fill counts as exploited (as fedsched's); a shortfall fill after
      // exploration does not.
      if (pool[pos].exploited) chosen_exploited.insert(static_cast<int>(pool[pos].index));
    }
    for (const std::string& e : draws.errors()) ADD_FAILURE() << e;
    EXPECT_EQ(draws.clients_left(), 0u);
    for (int c : chosen) EXPECT_OK((*book)->OnTaskAssigned(c, round, 0));
  };
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string key;
    in >> key;
    SCOPED_TRACE(absl::StrCat(name, " round ", round, ": ", line.substr(0, 60)));
    if (key == "config") {
      std::string n;
      in >> n >> n >> n >> options.clients_per_round;
    } else if (key == "client") {
      int id;
      Arm a;
      in >> id >> a.reward >> a.duration;
      arms[id] = a;
      v1::DeviceProfile d;
      d.set_num_samples(1000);
      EXPECT_TRUE((*book)->OnRegister(absl::StrCat("c", id), d, 0.0).ok());
      candidates.push_back(static_cast<ClientIndex>(id));
    } else if (key == "round") {
      if (round > 0) pacer.FinishRound(true);
      in >> round;
      exploited.clear();
    } else if (key == "uniform") {
      draws.AddClients(ReadIdList(in));
      select();
      std::istringstream again(line.substr(key.size()));
      EXPECT_EQ(chosen, ReadIds(again));
      ++compared;
    } else if (key == "exploit_draw" || key == "explore_draw" || key == "fill_draw") {
      draws.AddClients(ReadIdList(in));
    } else if (key == "exploited") {
      exploited = ReadIds(in);
    } else if (key == "picked") {
      select();
      EXPECT_EQ(chosen, ReadIds(in));
      EXPECT_EQ(chosen_exploited, exploited);
      ++compared;
    } else if (key == "eps_after") {
      double e;
      in >> e;
      EXPECT_EQ(pacer.epsilon(), e);
    } else if (key == "update") {
      ApplyUpdate(in, round, exploited, &arms, &pacer);
    }
  }
  return compared;
}

TEST(OortGoldenTest, FiftyClientsSelectTheReferenceSetGivenItsDraws) {
  EXPECT_EQ(ReplaySelection("oort_50_clients.txt"), 30);
}

TEST(OortGoldenTest, FourHundredClientsSelectTheReferenceSetGivenItsDraws) {
  EXPECT_EQ(ReplaySelection("oort_400_clients.txt"), 30);
}

}  // namespace
}  // namespace fedsched::planner

// Golden tests against Flower's strategies: tests/data/golden/flower_*.txt hold inputs and the
// models Flower's own code returned for them (the files name the repository and commit). fedsched
// must reproduce them to float32 tolerance.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/aggregation/aggregator.h"
#include "tests/server/aggregation/test_models.h"

namespace fedsched {
namespace {

using ::fedsched::testing::MakeModel;
using ::fedsched::testing::Values;

std::string GoldenPath(const std::string& name) {
  return std::string(FEDSCHED_TESTDATA_DIR) + "/golden/" + name;
}

// The golden models have tensors w0 (shape [3]) and w1 ([2, 2]), flattened in that order.
v1::Model ToModel(const std::vector<float>& v) {
  return MakeModel(
      {{"w0", {3}, {v.begin(), v.begin() + 3}}, {"w1", {2, 2}, {v.begin() + 3, v.end()}}});
}

std::vector<float> Flat(const v1::Model& m) {
  std::vector<float> out = Values(m, "w0");
  const std::vector<float> w1 = Values(m, "w1");
  out.insert(out.end(), w1.begin(), w1.end());
  return out;
}

std::vector<float> ReadFloats(std::istringstream& in) {
  std::vector<float> v;
  double x;
  while (in >> x) v.push_back(static_cast<float>(x));
  return v;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::abs(want[i]))) << "value " << i;
  }
}

TEST(FlowerGoldenTest, FedAdam) {
  std::ifstream file(GoldenPath("flower_fedadam.txt"));
  ASSERT_TRUE(file.good()) << GoldenPath("flower_fedadam.txt");
  v1::AggregationConfig config;
  config.set_rule(v1::AGGREGATION_RULE_FEDADAM);
  std::unique_ptr<Aggregator> agg;
  v1::Model global;
  int rounds = 0;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "config") {
      std::string name;
      double eta, b1, b2, tau;
      in >> name >> eta >> name >> b1 >> name >> b2 >> name >> tau;
      config.set_server_learning_rate(eta);
      config.set_beta1(b1);
      config.set_beta2(b2);
      config.set_tau(tau);
    } else if (key == "global") {
      global = ToModel(ReadFloats(in));
      ASSERT_OK_AND_ASSIGN(agg, Aggregator::Create(config, global));
    } else if (key == "update") {
      int64_t n;
      in >> n;
      ASSERT_OK(agg->Accumulate(ToModel(ReadFloats(in)), n));
    } else if (key == "expected") {
      ASSERT_OK_AND_ASSIGN(global, agg->Finalize(global));
      SCOPED_TRACE(absl::StrCat("round ", rounds + 1));
      ExpectNear(Flat(global), ReadFloats(in), 2e-5f);
      ++rounds;
    }
  }
  EXPECT_EQ(rounds, 5);
}

TEST(FlowerGoldenTest, KrumAndMultiKrum) {
  std::ifstream file(GoldenPath("flower_krum.txt"));
  ASSERT_TRUE(file.good()) << GoldenPath("flower_krum.txt");
  std::unique_ptr<Aggregator> agg;
  v1::Model global;
  int cases = 0;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "case") {
      int f, keep;
      in >> f >> keep;
      v1::AggregationConfig config;
      config.set_rule(keep == 0 ? v1::AGGREGATION_RULE_KRUM : v1::AGGREGATION_RULE_MULTI_KRUM);
      config.set_krum_byzantine(f);
      config.set_multi_krum_m(keep);
      ASSERT_OK_AND_ASSIGN(agg, Aggregator::Create(config, ToModel(std::vector<float>(7, 0.0f))));
    } else if (key == "global") {
      global = ToModel(ReadFloats(in));
    } else if (key == "update") {
      int64_t n;
      in >> n;
      ASSERT_OK(agg->Accumulate(ToModel(ReadFloats(in)), n));
    } else if (key == "expected") {
      SCOPED_TRACE(absl::StrCat("case ", cases + 1));
      ASSERT_OK_AND_ASSIGN(v1::Model next, agg->Finalize(global));
      ExpectNear(Flat(next), ReadFloats(in), 2e-5f);
      ++cases;
    }
  }
  EXPECT_EQ(cases, 7);
}

}  // namespace
}  // namespace fedsched

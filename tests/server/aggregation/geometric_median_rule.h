// A toy aggregation rule registered only by the tests, through the public registration path
// (server/aggregation/aggregation_rule_registry.h): the worked example of docs/guides/EXTENDING.md
// "Adding an aggregation rule". Linking geometric_median_rule.cc into a test binary registers it
// under kGeometricMedianRule; a config then selects it with aggregation { rule_name: "..." }.
#ifndef FEDSCHED_TESTS_SERVER_AGGREGATION_GEOMETRIC_MEDIAN_RULE_H_
#define FEDSCHED_TESTS_SERVER_AGGREGATION_GEOMETRIC_MEDIAN_RULE_H_

namespace fedsched::testing {

// The geometric median of the round's updates: the point minimising the example-weighted sum of
// L2 distances to them (robust aggregation, RFA: Pillutla, Kakade and Harchaoui, IEEE Trans.
// Signal Processing 2022, Algorithm 2), approximated by kGeometricMedianIterations steps of the
// smoothed Weiszfeld iteration from the weighted mean, distances floored at 1e-6.
inline constexpr char kGeometricMedianRule[] = "test_geometric_median";
inline constexpr int kGeometricMedianIterations = 100;

}  // namespace fedsched::testing

#endif  // FEDSCHED_TESTS_SERVER_AGGREGATION_GEOMETRIC_MEDIAN_RULE_H_

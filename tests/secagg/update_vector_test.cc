// The vector and FedAvg weight a client masks (secagg/update_vector.h): tensor order, and the
// weight's cap and its uniform case (docs/guides/SECURE_AGGREGATION.md "Weights").
#include "secagg/update_vector.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::secagg {
namespace {

using ::testing::ElementsAre;

TEST(UpdateVectorTest, FlattensTensorAfterTensorInTheModelsOrder) {
  fedsched::v1::Model m;
  fedsched::v1::Tensor* a = m.add_tensors();
  a->set_name("a");
  a->add_shape(2);
  a->add_data(1);
  a->add_data(2);
  fedsched::v1::Tensor* b = m.add_tensors();
  b->set_name("b");
  b->add_shape(3);
  for (float v : {3.0f, 4.0f, 5.0f}) b->add_data(v);
  EXPECT_THAT(FlattenUpdate(m), ElementsAre(1, 2, 3, 4, 5));
  EXPECT_TRUE(FlattenUpdate(fedsched::v1::Model()).empty());
}

TEST(UpdateVectorTest, WeightIsExamplesOverScaleCappedAtOneOrUniform) {
  EXPECT_DOUBLE_EQ(MaskWeight(50, 100), 0.5);
  EXPECT_DOUBLE_EQ(MaskWeight(100, 100), 1.0);
  EXPECT_DOUBLE_EQ(MaskWeight(150, 100), 1.0);  // never above 1: the clip bound holds
  EXPECT_DOUBLE_EQ(MaskWeight(0, 100), 0.0);
  EXPECT_DOUBLE_EQ(MaskWeight(37, 0), 1.0);  // example_scale 0: uniform (differential privacy)
}

}  // namespace
}  // namespace fedsched::secagg

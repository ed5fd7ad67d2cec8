// Named-tensor models (models/named_model.h): validation, model files, and InitialModel from a
// file (ModelConfig.initial_weights_path).
#include "models/named_model.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/reference_model.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

v1::Model TwoTensors() {
  v1::Model m;
  v1::Tensor* w = m.add_tensors();
  w->set_name("fc.weight");
  w->add_shape(2);
  w->add_shape(3);
  for (int i = 0; i < 6; ++i) w->add_data(0.5f * i);
  v1::Tensor* b = m.add_tensors();
  b->set_name("fc.bias");
  b->add_shape(2);
  b->add_data(1);
  b->add_data(2);
  return m;
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + ".pb"))
      .string();
}

TEST(NamedModelTest, ValidationNamesTheBadTensor) {
  EXPECT_OK(ValidateNamedTensors(TwoTensors()));
  EXPECT_THAT(ValidateNamedTensors(v1::Model()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no tensors")));
  v1::Model m = TwoTensors();
  m.mutable_tensors(1)->add_data(3);
  EXPECT_THAT(ValidateNamedTensors(m),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"fc.bias\" has 3 values")));
  m = TwoTensors();
  m.mutable_tensors(1)->set_name("fc.weight");
  EXPECT_THAT(ValidateNamedTensors(m),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("appears twice")));
  m = TwoTensors();
  m.mutable_tensors(0)->set_data(4, std::nanf(""));
  EXPECT_THAT(ValidateNamedTensors(m),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("non-finite")));
}

TEST(NamedModelTest, SameTensorsByNameInAnyOrder) {
  v1::Model reordered;
  *reordered.add_tensors() = TwoTensors().tensors(1);
  *reordered.add_tensors() = TwoTensors().tensors(0);
  EXPECT_OK(CheckSameTensors(TwoTensors(), reordered));
  reordered.mutable_tensors(1)->set_shape(1, 2);
  EXPECT_THAT(CheckSameTensors(TwoTensors(), reordered),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"fc.weight\" has shape [2, 2], expected [2, 3]")));
  reordered.mutable_tensors()->RemoveLast();
  EXPECT_THAT(CheckSameTensors(TwoTensors(), reordered),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("missing tensor")));
}

TEST(NamedModelTest, ModelFileRoundTripAndInitialModel) {
  const std::string path = TempPath("named_model_test");
  ASSERT_OK(SaveModelFile(TwoTensors(), path));
  ASSERT_OK_AND_ASSIGN(v1::Model loaded, LoadModelFile(path));
  EXPECT_EQ(loaded.SerializeAsString(), TwoTensors().SerializeAsString());

  v1::ModelConfig config;
  config.set_initial_weights_path(path);
  EXPECT_TRUE(IsNamedTensorModel(config));
  ASSERT_OK_AND_ASSIGN(v1::Model initial, InitialModel(config));
  EXPECT_EQ(initial.SerializeAsString(), TwoTensors().SerializeAsString());
  // With an architecture the file must be that architecture's model.
  config.set_architecture("cnn");
  EXPECT_FALSE(IsNamedTensorModel(config));
  EXPECT_THAT(InitialModel(config),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not a \"cnn\" model")));
  std::filesystem::remove(path);
}

TEST(NamedModelTest, BadModelFilesAreRefusedNamingThePath) {
  EXPECT_THAT(LoadModelFile("/nonexistent/model.pb"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/model.pb")));
  const std::string path = TempPath("named_model_garbage");
  std::ofstream(path) << "\xff\xff\xff not a model";
  EXPECT_THAT(LoadModelFile(path), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("not a serialized fedsched.v1.Model")));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace fedsched

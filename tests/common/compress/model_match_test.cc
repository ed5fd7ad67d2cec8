// A compressed update is matched against the model by name and shape before any payload is
// folded; every mismatch is refused by name.
#include "common/compress/model_match.h"

#include <vector>

#include "common/compress/encode.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fedsched::compress {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::Model Reference() {
  v1::Model m;
  v1::Tensor* w = m.add_tensors();
  w->set_name("w");
  w->add_shape(4);
  w->add_shape(8);
  v1::Tensor* b = m.add_tensors();
  b->set_name("b");
  b->add_shape(8);
  v1::Tensor* s = m.add_tensors();
  s->set_name("scalar");  // empty shape: one value
  return m;
}

// A valid compressed update for Reference(), tensors in the order b, scalar, w.
v1::CompressedModel Update() {
  v1::CompressedModel u;
  Rng rng(1);
  for (auto [name, n] :
       std::vector<std::pair<const char*, int>>{{"b", 8}, {"scalar", 1}, {"w", 32}}) {
    v1::CompressedTensor t = *EncodeFp16(std::vector<float>(n, 0.5f));
    t.set_name(name);
    *u.add_tensors() = t;
  }
  u.mutable_tensors(2)->add_shape(4);
  u.mutable_tensors(2)->add_shape(8);
  return u;
}

TEST(ModelMatchTest, MatchesByName) {
  absl::StatusOr<std::vector<int>> match = MatchCompressedModel(Update(), Reference());
  ASSERT_TRUE(match.ok()) << match.status();
  EXPECT_THAT(*match, ElementsAre(1, 2, 0));
}

TEST(ModelMatchTest, RefusesEachMismatch) {
  v1::CompressedModel u = Update();
  u.mutable_tensors()->RemoveLast();
  EXPECT_THAT(MatchCompressedModel(u, Reference()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("lacks tensor 'w'")));
  u = Update();
  *u.add_tensors() = u.tensors(0);
  EXPECT_THAT(MatchCompressedModel(u, Reference()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'b' twice")));
  u = Update();
  u.mutable_tensors(0)->set_name("c");
  EXPECT_THAT(MatchCompressedModel(u, Reference()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'c', which the model")));
  u = Update();
  u.mutable_tensors(2)->set_shape(0, 8);
  u.mutable_tensors(2)->set_shape(1, 4);
  EXPECT_THAT(MatchCompressedModel(u, Reference()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[8, 4], the model [4, 8]")));
  u = Update();
  *u.mutable_tensors(1) = *EncodeFp16(std::vector<float>(2, 0.5f));
  u.mutable_tensors(1)->set_name("scalar");
  EXPECT_THAT(MatchCompressedModel(u, Reference()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected 1")));
}

}  // namespace
}  // namespace fedsched::compress

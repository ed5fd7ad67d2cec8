#include "common/config.h"

#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "fedsched/v1/config.pb.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ConfigTest, ParsesKnownKeys) {
  v1::ServerConfig config;
  ASSERT_OK(ParseTextConfig("clients_per_round: 7\ntraining { batch_size: 16 }\n", "t", &config));
  EXPECT_EQ(config.clients_per_round(), 7);
  EXPECT_EQ(config.training().batch_size(), 16);
}

TEST(ConfigTest, UnknownKeyIsAnErrorNamingKeyAndLine) {
  v1::ServerConfig config;
  absl::Status s =
      ParseTextConfig("clients_per_round: 7\nclient_per_round: 3\n", "bad.textproto", &config);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          AllOf(HasSubstr("client_per_round"), HasSubstr("line 2"),
                                HasSubstr("bad.textproto"))));
}

TEST(ConfigTest, MissingFileIsNotFound) {
  v1::ServerConfig config;
  EXPECT_THAT(LoadTextConfig("/nonexistent/x.textproto", &config),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/x.textproto")));
}

TEST(Sha256Test, KnownVector) {
  EXPECT_EQ(ToHex(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, PiecesHashLikeTheirConcatenation) {
  const std::vector<std::string> pieces = {"a", "", "bc"};
  EXPECT_EQ(Sha256OfPieces(pieces), Sha256("abc"));
  EXPECT_EQ(Sha256OfPieces(absl::Span<const std::string>()), Sha256(""));
  const std::vector<std::string_view> views = {"a", "", "bc"};
  EXPECT_EQ(Sha256OfPieces(absl::MakeConstSpan(views)), Sha256("abc"));
  Sha256Stream stream;
  stream.Update("ab");
  stream.Update("c");
  EXPECT_EQ(stream.Finish(), Sha256("abc"));
}

}  // namespace
}  // namespace fedsched

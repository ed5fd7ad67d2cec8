// Upload stream messages parsed in place (server/service/upload_frame.h): any split of
// a serialized v1::UploadChunk into slices parses like the typed parser would, the data is
// viewed where it lies, malformed frames are clear errors, and UploadAssembler::AddFrame keeps
// large chunks in their frames and copies small ones.
#include "server/service/upload_frame.h"

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "server/service/grpc_service.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;
using ::testing::HasSubstr;

std::string Joined(const std::vector<std::string_view>& views) {
  std::string out;
  for (std::string_view v : views) out.append(v);
  return out;
}

bool Within(std::string_view inner, std::string_view outer) {
  return inner.data() >= outer.data() && inner.data() + inner.size() <= outer.data() + outer.size();
}

std::string Pattern(size_t n, int seed) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>((i * 31 + seed) & 0xff);
  return out;
}

v1::UploadChunk HeaderChunk(int64_t total_bytes, int64_t num_chunks, const std::string& payload) {
  v1::UploadChunk chunk;
  v1::UploadHeader* h = chunk.mutable_header();
  h->set_client_id("client-1");
  h->set_session_token("token");
  h->set_task_id("t-1");
  h->set_round(3);
  h->set_total_bytes(total_bytes);
  h->set_num_chunks(num_chunks);
  h->set_sha256(Sha256(payload));
  h->mutable_metrics()->set_num_examples(10);
  return chunk;
}

v1::UploadChunk DataChunk(int64_t seq, std::string data) {
  v1::UploadChunk chunk;
  chunk.set_seq(seq);
  chunk.set_data(std::move(data));
  return chunk;
}

TEST(ParseUploadFrameTest, AChunkSplitAnywhereParsesWithItsDataInPlace) {
  const std::string data = Pattern(3000, 1);
  const std::string wire = DataChunk(7, data).SerializeAsString();
  const std::string_view all = wire;
  for (size_t cut = 0; cut <= wire.size(); cut += (cut < 16 || cut > wire.size() - 16) ? 1 : 97) {
    SCOPED_TRACE(cut);
    // Two slices with an empty one between them, and the second cut again in three.
    const size_t third = cut + (wire.size() - cut) / 3;
    const std::vector<std::string_view> slices = {all.substr(0, cut), all.substr(cut, 0),
                                                  all.substr(cut, third - cut), all.substr(third)};
    ParsedUploadChunk parsed;
    ASSERT_OK(ParseUploadFrame(slices, &parsed));
    EXPECT_FALSE(parsed.fields.has_header());
    EXPECT_EQ(parsed.fields.seq(), 7);
    EXPECT_EQ(parsed.data_bytes, 3000);
    EXPECT_EQ(Joined(parsed.data), data);
    for (std::string_view view : parsed.data) {
      EXPECT_FALSE(view.empty());
      EXPECT_TRUE(Within(view, all)) << "data was copied";
    }
  }
}

TEST(ParseUploadFrameTest, HeadersAndTheTypedParsersSemantics) {
  const v1::UploadChunk header = HeaderChunk(5, 2, "hello");
  const std::string wire = header.SerializeAsString();
  const std::string_view all = wire;
  ParsedUploadChunk parsed;
  ASSERT_OK(ParseUploadFrame({all.substr(0, 9), all.substr(9)}, &parsed));
  ASSERT_TRUE(parsed.fields.has_header());
  EXPECT_EQ(parsed.fields.header().SerializeAsString(), header.header().SerializeAsString());
  EXPECT_TRUE(parsed.data.empty());

  // Of the oneof, the last member on the wire wins; unknown fields are skipped; seq anywhere.
  const std::string data = DataChunk(0, "abc").SerializeAsString();
  const std::string unknown = "\xa0\x06\x2a";  // field 100, varint 42
  const std::string seq = "\x18\x05";          // seq = 5
  const std::string header_then_data = wire + unknown + data + seq;
  ASSERT_OK(ParseUploadFrame({std::string_view(header_then_data)}, &parsed));
  EXPECT_FALSE(parsed.fields.has_header());
  EXPECT_EQ(Joined(parsed.data), "abc");
  EXPECT_EQ(parsed.fields.seq(), 5);
  const std::string data_then_header = seq + data + wire;
  ASSERT_OK(ParseUploadFrame({std::string_view(data_then_header)}, &parsed));
  EXPECT_TRUE(parsed.fields.has_header());
  EXPECT_TRUE(parsed.data.empty());
  EXPECT_EQ(parsed.data_bytes, 0);
  // An empty message: no header, no data (a data chunk without bytes, as typed).
  ASSERT_OK(ParseUploadFrame({}, &parsed));
  EXPECT_FALSE(parsed.fields.has_header());
  EXPECT_EQ(parsed.data_bytes, 0);
}

TEST(ParseUploadFrameTest, MalformedFramesAreClearErrors) {
  const std::string wire = DataChunk(1, Pattern(100, 2)).SerializeAsString();
  const auto code = absl::StatusCode::kInvalidArgument;
  ParsedUploadChunk parsed;
  const std::string truncated = wire.substr(0, wire.size() - 10);  // data first, then seq
  EXPECT_THAT(ParseUploadFrame({std::string_view(truncated)}, &parsed),
              StatusIs(code, HasSubstr("not a valid UploadChunk: truncated data")));
  const std::string bad_header = "\x0a\x02\xff\xff";  // field 1: bytes that are no UploadHeader
  EXPECT_THAT(ParseUploadFrame({std::string_view(bad_header)}, &parsed),
              StatusIs(code, HasSubstr("header is not a valid UploadHeader")));
  const std::string bad_wire_type = "\x0f\x01";  // field 1, wire type 7
  EXPECT_THAT(ParseUploadFrame({std::string_view(bad_wire_type)}, &parsed),
              StatusIs(code, HasSubstr("not a valid UploadChunk")));
  const std::string field_zero = "\x00\x01";
  EXPECT_THAT(ParseUploadFrame({std::string_view(field_zero.data(), 2)}, &parsed),
              StatusIs(code, HasSubstr("not a valid UploadChunk")));
  const std::string long_length = "\x12\xff\xff\xff\xff\x0f";  // data of 2^32 - 1 bytes
  EXPECT_THAT(ParseUploadFrame({std::string_view(long_length)}, &parsed),
              StatusIs(code, HasSubstr("truncated data")));
}

// Seeded mutations of valid chunks: the in-place parser accepts exactly what the typed parser
// accepts, with the same fields, however the bytes are split.
TEST(ParseUploadFrameTest, AgreesWithTheTypedParserOnMutatedMessages) {
  std::mt19937 random(13);
  const std::vector<std::string> seeds = {HeaderChunk(5, 2, "hello").SerializeAsString(),
                                          DataChunk(3, Pattern(40, 3)).SerializeAsString()};
  int accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string bytes = seeds[i % 2];
    for (int edits = 1 + static_cast<int>(random() % 3); edits > 0; --edits) {
      const size_t at = random() % (bytes.size() + 1);
      switch (random() % 3) {
        case 0:
          if (at < bytes.size()) bytes[at] = static_cast<char>(random());
          break;
        case 1:
          bytes.insert(at, 1, static_cast<char>(random()));
          break;
        default:
          bytes.resize(at);
      }
    }
    const size_t cut = random() % (bytes.size() + 1);
    const std::string_view all = bytes;
    ParsedUploadChunk parsed;
    const bool in_place = ParseUploadFrame({all.substr(0, cut), all.substr(cut)}, &parsed).ok();
    v1::UploadChunk typed;
    ASSERT_EQ(in_place, typed.ParseFromString(bytes)) << "case " << i << ": " << ToHex(bytes);
    if (!in_place) continue;
    ++accepted;
    EXPECT_EQ(parsed.fields.seq(), typed.seq());
    EXPECT_EQ(parsed.fields.has_header(), typed.has_header());
    EXPECT_EQ(parsed.fields.header().SerializeAsString(), typed.header().SerializeAsString());
    EXPECT_EQ(Joined(parsed.data), typed.data());
  }
  EXPECT_GT(accepted, 100);  // the mutations do not only produce garbage
}

// The frames of one upload, each message cut into `pieces` slices over one owned buffer.
std::vector<UploadFrame> Frames(const std::vector<v1::UploadChunk>& messages, int pieces,
                                std::vector<std::weak_ptr<const void>>* owners) {
  std::vector<UploadFrame> frames;
  for (const v1::UploadChunk& message : messages) {
    auto bytes = std::make_shared<const std::string>(message.SerializeAsString());
    UploadFrame frame;
    const std::string_view all = *bytes;
    size_t at = 0;
    for (int i = 1; i <= pieces; ++i) {
      const size_t end = i == pieces ? all.size() : all.size() * i / pieces;
      frame.slices.push_back(all.substr(at, end - at));
      at = end;
    }
    owners->push_back(bytes);
    frame.owner = std::move(bytes);
    frames.push_back(std::move(frame));
  }
  return frames;
}

TEST(UploadAssemblerFrameTest, LargeChunksStayInTheirFramesSmallOnesAreCopied) {
  constexpr int64_t kChunk = 4096;  // chunks from 2 KiB on are kept in place
  const std::string payload = Pattern(2 * kChunk + 100, 4);
  std::vector<v1::UploadChunk> messages = {HeaderChunk(2 * kChunk + 100, 4, payload)};
  messages.push_back(DataChunk(0, payload.substr(0, kChunk)));
  messages.push_back(DataChunk(1, payload.substr(kChunk, kChunk)));
  messages.push_back(DataChunk(2, payload.substr(2 * kChunk, 60)));
  messages.push_back(DataChunk(3, payload.substr(2 * kChunk + 60)));
  std::vector<std::weak_ptr<const void>> owners;
  std::vector<UploadFrame> frames = Frames(messages, 3, &owners);
  std::vector<std::string_view> frame_bytes;
  for (const std::weak_ptr<const void>& owner : owners) {
    frame_bytes.push_back(*std::static_pointer_cast<const std::string>(owner.lock()));
  }

  UploadAssembler assembler(1 << 20, kChunk);
  for (UploadFrame& frame : frames) ASSERT_OK(assembler.AddFrame(std::move(frame)));
  frames.clear();
  ASSERT_OK(assembler.Finish());
  EXPECT_EQ(assembler.payload(), payload);
  // The two full chunks are viewed in their frames (3 slices each); the two small ones were
  // copied into one buffer, and their frames released.
  const std::vector<std::string_view>& pieces = assembler.payload_pieces();
  ASSERT_EQ(pieces.size(), 7u);
  for (size_t i = 0; i < 6; ++i) EXPECT_TRUE(Within(pieces[i], frame_bytes[1 + i / 3])) << i;
  EXPECT_EQ(pieces[6], payload.substr(2 * kChunk));
  EXPECT_TRUE(owners[0].expired());  // the header's frame
  EXPECT_FALSE(owners[1].expired());
  EXPECT_FALSE(owners[2].expired());
  EXPECT_TRUE(owners[3].expired());
  EXPECT_TRUE(owners[4].expired());
  EXPECT_EQ(Sha256OfPieces(absl::MakeConstSpan(pieces)), messages[0].header().sha256());
  assembler.ReleasePayload();
  EXPECT_TRUE(assembler.payload_pieces().empty());
  EXPECT_TRUE(owners[1].expired());
  EXPECT_TRUE(owners[2].expired());
}

TEST(UploadAssemblerFrameTest, EmptyChunksMalformedFramesAndStreamErrors) {
  const auto code = absl::StatusCode::kInvalidArgument;
  std::vector<std::weak_ptr<const void>> owners;
  // Empty data chunks count as chunks and carry nothing.
  {
    std::vector<UploadFrame> frames = Frames(
        {HeaderChunk(5, 3, "hello"), DataChunk(0, ""), DataChunk(1, "hello"), DataChunk(2, "")}, 2,
        &owners);
    UploadAssembler assembler(100, 1024);
    for (UploadFrame& frame : frames) ASSERT_OK(assembler.AddFrame(std::move(frame)));
    ASSERT_OK(assembler.Finish());
    EXPECT_EQ(assembler.payload(), "hello");
  }
  // An empty payload is refused on the header.
  {
    std::vector<UploadFrame> frames = Frames({HeaderChunk(0, 1, "")}, 1, &owners);
    UploadAssembler assembler(100, 1024);
    EXPECT_THAT(assembler.AddFrame(std::move(frames[0])),
                StatusIs(code, HasSubstr("total_bytes must be in [1, 100], got 0")));
  }
  // A malformed frame spends the assembler.
  {
    std::vector<UploadFrame> frames =
        Frames({HeaderChunk(5, 1, "hello"), DataChunk(0, "hello")}, 2, &owners);
    UploadAssembler assembler(100, 1024);
    ASSERT_OK(assembler.AddFrame(std::move(frames[0])));
    frames[1].slices.back().remove_suffix(1);
    EXPECT_THAT(assembler.AddFrame(std::move(frames[1])),
                StatusIs(code, HasSubstr("not a valid UploadChunk: truncated data")));
    EXPECT_THAT(assembler.Finish(), StatusIs(code, HasSubstr("already rejected")));
  }
  // The stream checks apply to frames as to typed messages.
  {
    std::vector<UploadFrame> frames =
        Frames({HeaderChunk(5, 2, "hello"), DataChunk(1, "lo")}, 2, &owners);
    UploadAssembler assembler(100, 1024);
    ASSERT_OK(assembler.AddFrame(std::move(frames[0])));
    EXPECT_THAT(assembler.AddFrame(std::move(frames[1])),
                StatusIs(code, HasSubstr("got seq 1, expected 0")));
  }
}

}  // namespace
}  // namespace fedsched

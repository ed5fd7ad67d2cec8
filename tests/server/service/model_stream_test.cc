// Download frames (server/service/model_stream.h): each frame parses as the v1::ModelChunk the
// typed stream would have sent, the chunks reassemble the blob, and a frame keeps the blob alive.
#include "server/service/model_stream.h"

#include <memory>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "common/testing/status_matchers.h"

namespace fedsched {
namespace {

using ::fedsched::testing::StatusIs;

v1::ModelChunk Parse(const grpc::ByteBuffer& frame) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(frame.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  v1::ModelChunk chunk;
  EXPECT_TRUE(chunk.ParseFromString(bytes));
  return chunk;
}

std::shared_ptr<round::ModelBlob> MakeBlob(size_t size) {
  auto blob = std::make_shared<round::ModelBlob>();
  blob->bytes.resize(size);
  for (size_t i = 0; i < size; ++i) blob->bytes[i] = static_cast<char>(i * 7 + 3);
  blob->sha256 = Sha256(blob->bytes);
  return blob;
}

TEST(ModelStreamTest, FramesReassembleTheBlob) {
  for (size_t size : {size_t{1}, size_t{1000}, size_t{1024}, size_t{2500}}) {
    SCOPED_TRACE(size);
    std::shared_ptr<const round::ModelBlob> blob = MakeBlob(size);
    const int64_t count = ModelChunkCount(*blob, 1024);
    EXPECT_EQ(count, static_cast<int64_t>((size + 1023) / 1024));
    std::string joined;
    for (int64_t seq = 0; seq < count; ++seq) {
      v1::ModelChunk chunk = Parse(ModelChunkFrame(blob, seq, 1024));
      EXPECT_EQ(chunk.seq(), seq);
      EXPECT_EQ(chunk.total_bytes(), static_cast<int64_t>(size));
      EXPECT_EQ(chunk.sha256(), seq == 0 ? blob->sha256 : "");
      EXPECT_LE(chunk.data().size(), 1024u);
      joined += chunk.data();
    }
    EXPECT_EQ(joined, blob->bytes);
  }
}

TEST(ModelStreamTest, AFrameKeepsTheBlobAlive) {
  std::shared_ptr<const round::ModelBlob> blob = MakeBlob(3000);
  const std::string expected = blob->bytes.substr(1024, 1024);
  std::weak_ptr<const round::ModelBlob> watch = blob;
  grpc::ByteBuffer frame = ModelChunkFrame(blob, 1, 1024);
  blob.reset();  // a newer model was published
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(Parse(frame).data(), expected);
  frame.Clear();
  EXPECT_TRUE(watch.expired());
}

TEST(ModelStreamTest, ParsesDownloadRequests) {
  v1::DownloadModelRequest request;
  request.set_client_id("c1");
  request.set_task_id("t1");
  const std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  v1::DownloadModelRequest parsed;
  ASSERT_OK(ParseDownloadRequest(grpc::ByteBuffer(&slice, 1), &parsed));
  EXPECT_EQ(parsed.task_id(), "t1");
  grpc::Slice garbage(std::string("\xff\xff\xff"));
  EXPECT_THAT(ParseDownloadRequest(grpc::ByteBuffer(&garbage, 1), &parsed),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

}  // namespace
}  // namespace fedsched

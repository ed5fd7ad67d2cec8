// libFuzzer target: the server's update decoding path, from raw stream messages to the
// aggregate. Input: a sequence of frames, each a 2-byte little-endian length and that many bytes
// of a serialized v1::UploadChunk (what gRPC would hand the server). The harness feeds them to
// UploadAssembler exactly as the UploadUpdate reactor does (AddFrame, each message cut into two
// slices at a point its length picks), then parses the payload as a
// v1::Model, runs ValidateUpdate against a fixed 2-tensor reference, and folds accepted updates
// into an Aggregator. Crashes, sanitizer reports, or an accepted update that breaks the
// aggregate's invariants (a non-finite model) are bugs.
//
// FEDSCHED_FUZZ_SEED_DIR=DIR makes the first run write a few well-formed inputs to DIR.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/sha256.h"
#include "server/aggregation/aggregator.h"
#include "server/aggregation/checks.h"
#include "server/service/grpc_service.h"

namespace fedsched {
namespace {

constexpr int64_t kMaxTotalBytes = 64 * 1024;
constexpr int64_t kChunkBytes = 1024;

const v1::Model& Reference() {
  static const v1::Model* const model = [] {
    auto* m = new v1::Model();
    v1::Tensor* w = m->add_tensors();
    w->set_name("w");
    w->add_shape(4);
    w->add_shape(8);
    for (int i = 0; i < 32; ++i) w->add_data(0.25f * (i % 8));
    v1::Tensor* b = m->add_tensors();
    b->set_name("b");
    b->add_shape(8);
    for (int i = 0; i < 8; ++i) b->add_data(0.5f);
    return m;
  }();
  return *model;
}

void AppendFrame(const v1::UploadChunk& chunk, std::string* out) {
  const std::string bytes = chunk.SerializeAsString();
  out->push_back(static_cast<char>(bytes.size() & 0xff));
  out->push_back(static_cast<char>(bytes.size() >> 8));
  out->append(bytes);
}

// A well-formed upload of `delta` in `chunk` byte pieces, framed as the fuzzer reads it.
std::string FramedUpload(const v1::Model& delta, int64_t examples, size_t chunk) {
  const std::string payload = delta.SerializeAsString();
  std::string out;
  v1::UploadChunk header;
  v1::UploadHeader* h = header.mutable_header();
  h->set_client_id("client-1");
  h->set_session_token("s-token");
  h->set_task_id("t-task");
  h->set_round(1);
  h->set_total_bytes(static_cast<int64_t>(payload.size()));
  h->set_sha256(Sha256(payload));
  h->set_num_chunks(static_cast<int64_t>((payload.size() + chunk - 1) / chunk));
  h->mutable_metrics()->set_num_examples(examples);
  AppendFrame(header, &out);
  for (size_t offset = 0, seq = 0; offset < payload.size(); offset += chunk, ++seq) {
    v1::UploadChunk data;
    data.set_seq(static_cast<int64_t>(seq));
    data.set_data(payload.substr(offset, chunk));
    AppendFrame(data, &out);
  }
  return out;
}

void WriteSeeds(const std::string& dir) {
  v1::Model delta = Reference();
  for (v1::Tensor& t : *delta.mutable_tensors()) {
    for (float& v : *t.mutable_data()) v = 0.125f;
  }
  std::ofstream(dir + "/one_chunk") << FramedUpload(delta, 10, 1024);
  std::ofstream(dir + "/small_chunks") << FramedUpload(delta, 3, 40);
  delta.mutable_tensors(0)->set_data(3, NAN);
  std::ofstream(dir + "/nan") << FramedUpload(delta, 10, 64);
}

}  // namespace
}  // namespace fedsched

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  if (const char* dir = std::getenv("FEDSCHED_FUZZ_SEED_DIR")) fedsched::WriteSeeds(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedsched;
  UploadAssembler assembler(kMaxTotalBytes, kChunkBytes);
  size_t at = 0;
  bool ok = true;
  while (ok && at + 2 <= size) {
    const size_t length = data[at] | (static_cast<size_t>(data[at + 1]) << 8);
    at += 2;
    if (length > size - at) break;
    const std::string_view message(reinterpret_cast<const char*>(data + at), length);
    const size_t cut = length == 0 ? 0 : (length * 7 + 3) % (length + 1);
    // A malformed message ends the stream (the server answers an error).
    ok = assembler.AddFrame({.slices = {message.substr(0, cut), message.substr(cut)}, .owner = {}})
             .ok();
    at += length;
  }
  if (!ok || !assembler.Finish().ok()) return 0;
  const std::string& payload = assembler.payload();
  if (static_cast<int64_t>(payload.size()) != assembler.header().total_bytes()) abort();
  // The SHA-256 check of Coordinator::SubmitUpdate is not fuzzable; both outcomes go on to
  // parsing so that the decoder sees every payload.
  (void)(Sha256(payload) == assembler.header().sha256());
  v1::Model delta;
  if (!delta.ParseFromString(payload)) return 0;
  if (!ValidateUpdate(delta, Reference()).ok()) return 0;
  v1::AggregationConfig config;
  config.set_clip_update_norm(assembler.header().total_bytes() % 2 == 0 ? 0.0 : 1.0);
  auto aggregator = Aggregator::Create(config, Reference());
  if (!aggregator.ok()) abort();
  if (!(*aggregator)->Accumulate(delta, assembler.header().metrics().num_examples()).ok()) {
    return 0;
  }
  absl::StatusOr<v1::Model> next = (*aggregator)->Finalize(Reference());
  // An accepted update may still be refused at Finalize (e.g. float overflow), but a model that
  // comes out must be finite.
  if (next.ok() && !ValidateModel(*next).ok()) abort();
  return 0;
}

// Upload validation and reassembly for CoordinatorService::UploadUpdate (declared in
// grpc_service.h): the header's metrics are checked before any payload is accepted, and chunks
// are reassembled in order within the byte budgets the service hands in.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/service/grpc_service.h"

namespace fedsched {
namespace {

// Counts above 2^53 lose precision in the doubles that profiles and records keep, and a few of
// them summed overflow int64: no honest device reports one.
constexpr int64_t kMaxCount = int64_t{1} << 53;
absl::Status CheckCount(const char* field, int64_t value, int64_t minimum) {
  if (value < minimum || value > kMaxCount) {
    return absl::InvalidArgumentError(absl::StrCat("upload header: metrics.", field,
                                                   " must be in [", minimum, ", ", kMaxCount,
                                                   "], got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckReal(const char* field, double value, bool non_negative) {
  if (!std::isfinite(value) || (non_negative && value < 0)) {
    return absl::InvalidArgumentError(absl::StrCat("upload header: metrics.", field, " must be ",
                                                   non_negative ? "finite and >= 0" : "finite",
                                                   ", got ", value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateUploadHeader(const v1::UploadHeader& header, int64_t max_total_bytes,
                                  int64_t max_chunk_bytes) {
  if (header.total_bytes() <= 0 || header.total_bytes() > max_total_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("upload header: total_bytes must be in [1, ",
                                                   max_total_bytes, "], got ",
                                                   header.total_bytes()));
  }
  const int64_t min_chunks = (header.total_bytes() + max_chunk_bytes - 1) / max_chunk_bytes;
  if (header.num_chunks() < min_chunks || header.num_chunks() > header.total_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "upload header: num_chunks must be in [", min_chunks, ", ", header.total_bytes(), "] for ",
        header.total_bytes(), " bytes in chunks of at most ", max_chunk_bytes, ", got ",
        header.num_chunks()));
  }
  if (header.sha256().size() != 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("upload header: sha256 must be 32 bytes, got ", header.sha256().size()));
  }
  const v1::UpdateMetrics& m = header.metrics();
  FEDSCHED_RETURN_IF_ERROR(CheckCount("num_examples", m.num_examples(), 1));
  FEDSCHED_RETURN_IF_ERROR(CheckCount("download_bytes", m.download_bytes(), 0));
  FEDSCHED_RETURN_IF_ERROR(CheckCount("cache_hits", m.cache_hits(), 0));
  FEDSCHED_RETURN_IF_ERROR(CheckCount("cache_misses", m.cache_misses(), 0));
  FEDSCHED_RETURN_IF_ERROR(CheckCount("storage_bytes_read", m.storage_bytes_read(), 0));
  FEDSCHED_RETURN_IF_ERROR(CheckCount("local_steps", m.local_steps(), 0));
  FEDSCHED_RETURN_IF_ERROR(CheckReal("train_seconds", m.train_seconds(), true));
  FEDSCHED_RETURN_IF_ERROR(CheckReal("download_seconds", m.download_seconds(), true));
  FEDSCHED_RETURN_IF_ERROR(CheckReal("io_seconds", m.io_seconds(), true));
  FEDSCHED_RETURN_IF_ERROR(CheckReal("statistical_utility", m.statistical_utility(), true));
  FEDSCHED_RETURN_IF_ERROR(CheckReal("mean_loss", m.mean_loss(), false));
  return absl::OkStatus();
}

UploadAssembler::UploadAssembler(int64_t max_total_bytes, int64_t max_chunk_bytes)
    : max_total_bytes_(max_total_bytes),
      max_chunk_bytes_(std::max<int64_t>(1, max_chunk_bytes)),
      // Honest chunks are max_chunk_bytes (the last one excepted): all kept in place. A hostile
      // stream of chunks just above the bound holds at most about one frame's bookkeeping per
      // half chunk (chunk_bytes >= 1 KiB, common/transport.h).
      reference_from_bytes_(
          std::max<int64_t>(1, std::min<int64_t>(64 << 10, max_chunk_bytes_ / 2))) {}

absl::Status UploadAssembler::Fail(absl::Status s) {
  failed_ = true;
  ReleasePayload();
  return s;
}

absl::Status UploadAssembler::Check(const v1::UploadHeader* header, int64_t seq, int64_t data_bytes,
                                    bool* is_data) {
  *is_data = false;
  if (failed_) return absl::InvalidArgumentError("upload stream already rejected");
  if (header != nullptr) {
    if (has_header_) return Fail(absl::InvalidArgumentError("upload stream has a second header"));
    absl::Status s = ValidateUploadHeader(*header, max_total_bytes_, max_chunk_bytes_);
    if (!s.ok()) return Fail(std::move(s));
    header_ = *header;
    has_header_ = true;
    // Room for the pieces of an honest stream (the declared count may be absurdly large).
    pieces_.reserve(static_cast<size_t>(header_.total_bytes() / max_chunk_bytes_ + 1));
    return absl::OkStatus();
  }
  if (!has_header_) return Fail(absl::InvalidArgumentError("upload data before its header"));
  if (seq != next_seq_) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("upload chunk out of order: got seq ", seq, ", expected ", next_seq_)));
  }
  if (next_seq_ >= header_.num_chunks()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("upload carries more chunks than the ",
                                                        header_.num_chunks(), " it declared")));
  }
  if (data_bytes > header_.total_bytes() - received_bytes_) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("upload carries more bytes than the ",
                                                        header_.total_bytes(), " it declared")));
  }
  ++next_seq_;
  received_bytes_ += data_bytes;
  *is_data = true;
  return absl::OkStatus();
}

void UploadAssembler::AppendCopy(std::string_view data, int64_t rest) {
  if (data.empty()) return;
  // Coalescing keeps any two neighbouring copies above max_chunk_bytes together.
  if (open_copy_ && static_cast<int64_t>(owned_.back().size() + data.size()) <= max_chunk_bytes_) {
    owned_.back().append(data);
  } else {
    std::string& buffer = owned_.emplace_back();
    buffer.reserve(static_cast<size_t>(std::min(max_chunk_bytes_, rest)));
    buffer.append(data);
    pieces_.emplace_back();
    open_copy_ = true;
  }
  // Only the last piece views the growing buffer: re-point it after any reallocation.
  pieces_.back() = owned_.back();
}

void UploadAssembler::KeepViews(absl::Span<const std::string_view> data, int64_t bytes,
                                std::shared_ptr<const void> owner) {
  if (bytes == 0) return;
  if (bytes < reference_from_bytes_) {
    for (std::string_view view : data) AppendCopy(view, CopyRoom(bytes));
    return;
  }
  for (std::string_view view : data) {
    if (!view.empty()) pieces_.push_back(view);
  }
  owners_.push_back(std::move(owner));
  open_copy_ = false;
}

void UploadAssembler::Keep(std::string&& data) {
  if (data.empty()) return;
  if (static_cast<int64_t>(data.size()) < reference_from_bytes_) {
    AppendCopy(data, CopyRoom(static_cast<int64_t>(data.size())));
    return;
  }
  // A moved string keeps its heap buffer, and deque elements never move: the view stays valid.
  pieces_.push_back(owned_.emplace_back(std::move(data)));
  open_copy_ = false;
}

void UploadAssembler::ReleasePayload() {
  std::vector<std::string_view>().swap(pieces_);
  std::deque<std::string>().swap(owned_);
  std::vector<std::shared_ptr<const void>>().swap(owners_);
  open_copy_ = false;
}

absl::Status UploadAssembler::AddFrame(UploadFrame frame) {
  if (failed_) return absl::InvalidArgumentError("upload stream already rejected");
  ParsedUploadChunk chunk;
  if (absl::Status parsed = ParseUploadFrame(frame.slices, &chunk); !parsed.ok()) {
    return Fail(std::move(parsed));
  }
  bool is_data = false;
  FEDSCHED_RETURN_IF_ERROR(Check(chunk.fields.has_header() ? &chunk.fields.header() : nullptr,
                                 chunk.fields.seq(), chunk.data_bytes, &is_data));
  if (is_data) KeepViews(chunk.data, chunk.data_bytes, std::move(frame.owner));
  return absl::OkStatus();
}

absl::Status UploadAssembler::Add(const v1::UploadChunk& chunk) {
  bool is_data = false;
  FEDSCHED_RETURN_IF_ERROR(Check(chunk.has_header() ? &chunk.header() : nullptr, chunk.seq(),
                                 static_cast<int64_t>(chunk.data().size()), &is_data));
  if (is_data) Keep(std::string(chunk.data()));
  return absl::OkStatus();
}

absl::Status UploadAssembler::Add(v1::UploadChunk&& chunk) {
  bool is_data = false;
  FEDSCHED_RETURN_IF_ERROR(Check(chunk.has_header() ? &chunk.header() : nullptr, chunk.seq(),
                                 static_cast<int64_t>(chunk.data().size()), &is_data));
  if (is_data) Keep(std::move(*chunk.mutable_data()));
  return absl::OkStatus();
}

std::string UploadAssembler::payload() const {
  std::string payload;
  payload.reserve(static_cast<size_t>(received_bytes_));
  for (std::string_view piece : pieces_) payload.append(piece);
  return payload;
}

absl::Status UploadAssembler::Finish() const {
  if (failed_) return absl::InvalidArgumentError("upload stream already rejected");
  if (!has_header_) return absl::InvalidArgumentError("upload stream ended without a header");
  if (next_seq_ != header_.num_chunks() || received_bytes_ != header_.total_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("truncated upload: got ", next_seq_, " of ", header_.num_chunks(), " chunks, ",
                     received_bytes_, " of ", header_.total_bytes(), " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace fedsched

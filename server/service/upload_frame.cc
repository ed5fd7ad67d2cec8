// Upload stream messages read in place (upload_frame.h).
#include "server/service/upload_frame.h"

#include <algorithm>
#include <climits>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace fedsched {

bool PiecesInputStream::Next(const void** data, int* size) {
  while (index_ < pieces_.size() && offset_ == pieces_[index_].size()) {
    ++index_;
    offset_ = 0;
  }
  if (index_ == pieces_.size()) return false;
  const size_t n = std::min<size_t>(pieces_[index_].size() - offset_, INT_MAX);
  *data = pieces_[index_].data() + offset_;
  *size = static_cast<int>(n);
  offset_ += n;
  position_ += static_cast<int64_t>(n);
  return true;
}

void PiecesInputStream::BackUp(int count) {
  offset_ -= static_cast<size_t>(count);
  position_ -= count;
}

bool PiecesInputStream::Skip(int count) {
  const void* data;
  int size;
  while (count > 0) {
    if (!Next(&data, &size)) return false;
    if (size > count) BackUp(size - count);
    count -= std::min(size, count);
  }
  return true;
}

bool ParsePieces(absl::Span<const std::string_view> pieces,
                 google::protobuf::MessageLite* message) {
  if (pieces.size() == 1) {
    return pieces[0].size() <= INT_MAX &&
           message->ParseFromArray(pieces[0].data(), static_cast<int>(pieces[0].size()));
  }
  PiecesInputStream input(pieces);
  return message->ParseFromZeroCopyStream(&input);
}

namespace {

using google::protobuf::internal::WireFormatLite;

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("upload stream message is not a valid UploadChunk: ", what));
}

// The views of bytes [start, start + length) of the concatenation of `slices`.
void ViewsOf(absl::Span<const std::string_view> slices, int64_t start, int64_t length,
             std::vector<std::string_view>* out) {
  out->clear();
  for (std::string_view slice : slices) {
    if (length == 0) break;
    const auto size = static_cast<int64_t>(slice.size());
    if (start >= size) {
      start -= size;
      continue;
    }
    const int64_t n = std::min(size - start, length);
    out->push_back(slice.substr(static_cast<size_t>(start), static_cast<size_t>(n)));
    length -= n;
    start = 0;
  }
}

}  // namespace

absl::Status ParseUploadFrame(absl::Span<const std::string_view> slices, ParsedUploadChunk* out) {
  out->fields.Clear();
  out->data.clear();
  out->data_bytes = 0;
  int64_t total = 0;
  for (std::string_view slice : slices) total += static_cast<int64_t>(slice.size());
  if (total > INT_MAX) return Malformed("larger than 2 GiB");
  PiecesInputStream stream(slices);
  google::protobuf::io::CodedInputStream input(&stream);
  input.PushLimit(static_cast<int>(total));
  bool has_data = false;
  while (input.BytesUntilLimit() > 0) {
    const uint32_t tag = input.ReadTagNoLastTag();
    if (tag == 0) {
      return Malformed(
          absl::StrCat("invalid tag at byte ", input.CurrentPosition(), " of ", total));
    }
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    if (field == 0) return Malformed("field number 0");
    const bool delimited =
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (field == 1 && delimited) {
      uint32_t length = 0;
      std::string bytes;
      if (!input.ReadVarint32(&length) || length > INT_MAX ||
          !input.ReadString(&bytes, static_cast<int>(length))) {
        return Malformed("truncated header");
      }
      // A oneof member replaces the other; a repeated message field merges.
      if (has_data || !out->fields.has_header()) out->fields.mutable_header()->Clear();
      has_data = false;
      out->data.clear();
      out->data_bytes = 0;
      if (!out->fields.mutable_header()->MergeFromString(bytes)) {
        return Malformed("its header is not a valid UploadHeader");
      }
    } else if (field == 2 && delimited) {
      uint32_t length = 0;
      if (!input.ReadVarint32(&length) || length > INT_MAX) return Malformed("truncated data");
      const int start = input.CurrentPosition();
      if (!input.Skip(static_cast<int>(length))) return Malformed("truncated data");
      out->fields.clear_header();
      has_data = true;
      ViewsOf(slices, start, length, &out->data);
      out->data_bytes = length;
    } else if (field == 3 &&
               WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
      uint64_t seq = 0;
      if (!input.ReadVarint64(&seq)) return Malformed("truncated seq");
      out->fields.set_seq(static_cast<int64_t>(seq));
    } else if (!WireFormatLite::SkipField(&input, tag)) {
      return Malformed(absl::StrCat("field ", field, " is truncated or malformed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace fedsched

#include "models/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace fedsched {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension
constexpr uint32_t kMaxImageSide = 16384;
// Pixels are read and converted in pieces of this many bytes, so that a header that claims more
// images than the file holds costs no more memory than the file's real contents.
constexpr size_t kReadChunkBytes = size_t{1} << 20;
// Pixels reserved at once before reading (256 MB of floats): a data set up to this size (every
// one shipped) is scaled into its final buffer without regrowing it, which cost the copies and
// page faults of doubling. The reservation is address space: memory is taken only as pixels are
// written, so a header claiming more than the file holds still costs only the real contents.
constexpr size_t kReservedPixels = size_t{64} << 20;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

// An open IDX file (gzip or plain) that remembers its path for error messages.
class IdxFile {
 public:
  static absl::StatusOr<IdxFile> Open(const std::string& path) {
    errno = 0;
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) {
      return absl::NotFoundError(absl::StrCat("cannot open IDX file ", path, ": ",
                                              errno != 0 ? std::strerror(errno) : "gzopen failed"));
    }
    return IdxFile(path, GzHandle(f));
  }

  // Reads exactly `n` bytes of `what` into `out`.
  absl::Status ReadExact(void* out, size_t n, const char* what) {
    auto* dst = static_cast<char*>(out);
    size_t done = 0;
    while (done < n) {
      const unsigned want = static_cast<unsigned>(std::min<size_t>(n - done, INT_MAX));
      const int got = gzread(file_.get(), dst + done, want);
      if (got < 0) {
        int errnum = 0;
        const char* msg = gzerror(file_.get(), &errnum);
        return absl::DataLossError(
            absl::StrCat("IDX file ", path_, ": read error in ", what, ": ", msg));
      }
      if (got == 0) {
        int errnum = 0;
        const char* msg = gzerror(file_.get(), &errnum);
        return absl::DataLossError(absl::StrFormat(
            "IDX file %s is truncated: expected %d more bytes of %s, got %d%s%s", path_, n, what,
            done, errnum != Z_OK ? " (zlib: " : "", errnum != Z_OK ? absl::StrCat(msg, ")") : ""));
      }
      done += static_cast<size_t>(got);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<uint32_t> ReadBigEndian32(const char* what) {
    unsigned char b[4];
    FEDSCHED_RETURN_IF_ERROR(ReadExact(b, sizeof(b), what));
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
  }

  absl::Status ExpectMagic(uint32_t want, const char* kind) {
    FEDSCHED_ASSIGN_OR_RETURN(uint32_t magic, ReadBigEndian32("the magic number"));
    if (magic != want) {
      return absl::InvalidArgumentError(
          absl::StrFormat("IDX file %s has bad magic number 0x%08x; an IDX %s file has 0x%08x",
                          path_, magic, kind, want));
    }
    return absl::OkStatus();
  }

  const std::string& path() const { return path_; }

 private:
  IdxFile(std::string path, GzHandle file) : path_(std::move(path)), file_(std::move(file)) {}

  std::string path_;
  GzHandle file_;
};

}  // namespace

absl::StatusOr<ImageDataset> LoadIdxDataset(const std::string& images_path,
                                            const std::string& labels_path, int64_t max_samples) {
  FEDSCHED_ASSIGN_OR_RETURN(IdxFile images, IdxFile::Open(images_path));
  FEDSCHED_ASSIGN_OR_RETURN(IdxFile labels, IdxFile::Open(labels_path));

  FEDSCHED_RETURN_IF_ERROR(images.ExpectMagic(kImagesMagic, "image (unsigned byte, 3-D)"));
  FEDSCHED_ASSIGN_OR_RETURN(uint32_t num_images, images.ReadBigEndian32("the image count"));
  FEDSCHED_ASSIGN_OR_RETURN(uint32_t rows, images.ReadBigEndian32("the row count"));
  FEDSCHED_ASSIGN_OR_RETURN(uint32_t cols, images.ReadBigEndian32("the column count"));
  if (rows == 0 || cols == 0 || rows > kMaxImageSide || cols > kMaxImageSide) {
    return absl::InvalidArgumentError(
        absl::StrFormat("IDX file %s has image size %dx%d; each side must be in [1, %d]",
                        images_path, rows, cols, kMaxImageSide));
  }
  FEDSCHED_RETURN_IF_ERROR(labels.ExpectMagic(kLabelsMagic, "label (unsigned byte, 1-D)"));
  FEDSCHED_ASSIGN_OR_RETURN(uint32_t num_labels, labels.ReadBigEndian32("the label count"));
  if (num_images != num_labels) {
    return absl::InvalidArgumentError(
        absl::StrFormat("IDX files disagree: %s holds %d images but %s holds %d labels",
                        images_path, num_images, labels_path, num_labels));
  }

  int64_t n = num_images;
  if (max_samples > 0) n = std::min(n, max_samples);
  ImageDataset ds;
  ds.rows = static_cast<int>(rows);
  ds.cols = static_cast<int>(cols);

  ds.labels.resize(static_cast<size_t>(n));
  FEDSCHED_RETURN_IF_ERROR(labels.ReadExact(ds.labels.data(), ds.labels.size(), "the labels"));
  for (int64_t i = 0; i < n; ++i) {
    if (ds.labels[i] >= kNumClasses) {
      return absl::DataLossError(absl::StrFormat("IDX file %s: label %d of sample %d exceeds %d",
                                                 labels_path, ds.labels[i], i, kNumClasses - 1));
    }
  }

  const size_t total = static_cast<size_t>(n) * rows * cols;
  std::vector<uint8_t> chunk(std::min(total, kReadChunkBytes));
  ds.pixels.reserve(std::min(total, kReservedPixels));
  for (size_t done = 0; done < total;) {
    const size_t len = std::min(total - done, chunk.size());
    FEDSCHED_RETURN_IF_ERROR(images.ReadExact(chunk.data(), len, "the pixel data"));
    ds.pixels.reserve(std::min(total, std::max(2 * ds.pixels.size(), done + len)));
    ds.pixels.resize(done + len);
    float* out = ds.pixels.data() + done;
    for (size_t i = 0; i < len; ++i) out[i] = PixelToUnit(chunk[i]);
    done += len;
  }
  ds.size = n;
  return ds;
}

}  // namespace fedsched

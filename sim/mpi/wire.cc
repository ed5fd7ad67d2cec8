#include "sim/mpi/wire.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "google/protobuf/message_lite.h"

namespace fedsched::sim::mpi {
namespace {

// Fixed-width little-endian fields (every supported target is little-endian; the bytes never
// leave one job, whose ranks run the same binary).
class Writer {
 public:
  void U64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void F64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    U64(bits);
  }
  void Bytes(const std::string& s) {
    U64(s.size());
    out_.append(s);
  }
  // A message as its serialized size, then its bytes (no intermediate string).
  void Proto(const google::protobuf::MessageLite& m) {
    const size_t n = m.ByteSizeLong();
    out_.reserve(out_.size() + sizeof(uint64_t) + n);
    U64(n);
    m.AppendToString(&out_);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  absl::StatusOr<uint64_t> U64(const char* what) {
    if (in_.size() - pos_ < sizeof(uint64_t)) return Truncated(what);
    uint64_t v;
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  absl::StatusOr<int64_t> I64(const char* what) {
    FEDSCHED_ASSIGN_OR_RETURN(uint64_t v, U64(what));
    return static_cast<int64_t>(v);
  }
  absl::StatusOr<double> F64(const char* what) {
    FEDSCHED_ASSIGN_OR_RETURN(uint64_t bits, U64(what));
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  absl::StatusOr<std::string> Bytes(const char* what) {
    FEDSCHED_ASSIGN_OR_RETURN(uint64_t n, U64(what));
    if (in_.size() - pos_ < n) return Truncated(what);
    std::string s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // A count of items of at least 8 bytes each (bounds a malformed count before reserving).
  absl::StatusOr<size_t> Count(const char* what) {
    FEDSCHED_ASSIGN_OR_RETURN(uint64_t n, U64(what));
    if (n > (in_.size() - pos_) / 8) return Truncated(what);
    return static_cast<size_t>(n);
  }
  template <typename Message>
  absl::Status Proto(const char* what, Message* m) {
    FEDSCHED_ASSIGN_OR_RETURN(std::string bytes, Bytes(what));
    if (!m->ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat("sim mpi message: malformed ", what));
    }
    return absl::OkStatus();
  }
  absl::Status End(const char* message) const {
    if (pos_ != in_.size()) {
      return absl::DataLossError(absl::StrCat("sim mpi message: ", in_.size() - pos_,
                                              " trailing bytes after a ", message));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Truncated(const char* what) const {
    return absl::DataLossError(absl::StrCat("sim mpi message: truncated at ", what, " (byte ", pos_,
                                            " of ", in_.size(), ")"));
  }
  const std::string& in_;
  size_t pos_ = 0;
};

absl::StatusOr<absl::Status> ReadStatus(Reader& r) {
  FEDSCHED_ASSIGN_OR_RETURN(int64_t code, r.I64("status code"));
  FEDSCHED_ASSIGN_OR_RETURN(std::string message, r.Bytes("status message"));
  if (code < 0 || code > static_cast<int64_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::DataLossError(absl::StrCat("sim mpi message: bad status code ", code));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

void WriteStatus(Writer& w, const absl::Status& s) {
  w.I64(static_cast<int64_t>(s.code()));
  w.Bytes(std::string(s.message()));
}

}  // namespace

std::string EncodeStatus(const absl::Status& status) {
  Writer w;
  WriteStatus(w, status);
  return w.Take();
}

absl::StatusOr<absl::Status> DecodeStatus(const std::string& bytes) {
  Reader r(bytes);
  FEDSCHED_ASSIGN_OR_RETURN(absl::Status s, ReadStatus(r));
  FEDSCHED_RETURN_IF_ERROR(r.End("status"));
  return s;
}

std::string EncodeTrainCommand(const TrainCommand& command) {
  Writer w;
  w.Bytes(command.global);
  w.U64(command.tasks.size());
  for (const TrainTask& t : command.tasks) {
    w.I64(t.client);
    w.Bytes(t.task_id);
    w.I64(t.round);
    w.I64(t.local_steps);
    w.Proto(t.cache_plan);
  }
  w.U64(command.prefetches.size());
  for (const PrefetchHint& p : command.prefetches) {
    w.I64(p.client);
    w.Proto(p.plan);
  }
  return w.Take();
}

absl::StatusOr<TrainCommand> DecodeTrainCommand(const std::string& bytes) {
  Reader r(bytes);
  TrainCommand c;
  FEDSCHED_ASSIGN_OR_RETURN(c.global, r.Bytes("global model"));
  FEDSCHED_ASSIGN_OR_RETURN(size_t tasks, r.Count("task count"));
  c.tasks.resize(tasks);
  for (TrainTask& t : c.tasks) {
    FEDSCHED_ASSIGN_OR_RETURN(int64_t client, r.I64("task client"));
    FEDSCHED_ASSIGN_OR_RETURN(t.task_id, r.Bytes("task id"));
    FEDSCHED_ASSIGN_OR_RETURN(t.round, r.I64("task round"));
    FEDSCHED_ASSIGN_OR_RETURN(int64_t steps, r.I64("task local steps"));
    FEDSCHED_RETURN_IF_ERROR(r.Proto("task cache plan", &t.cache_plan));
    t.client = static_cast<int32_t>(client);
    t.local_steps = static_cast<int32_t>(steps);
  }
  FEDSCHED_ASSIGN_OR_RETURN(size_t prefetches, r.Count("prefetch count"));
  c.prefetches.resize(prefetches);
  for (PrefetchHint& p : c.prefetches) {
    FEDSCHED_ASSIGN_OR_RETURN(int64_t client, r.I64("prefetch client"));
    FEDSCHED_RETURN_IF_ERROR(r.Proto("prefetch plan", &p.plan));
    p.client = static_cast<int32_t>(client);
  }
  FEDSCHED_RETURN_IF_ERROR(r.End("train command"));
  return c;
}

absl::StatusOr<std::string> EncodeTrainedTask(const TrainedTask& task) {
  if (task.delta == nullptr) {
    return absl::InvalidArgumentError("sim mpi message: a trained task without a delta");
  }
  Writer w;
  w.I64(task.work.examples);
  w.I64(task.work.cache_hits);
  w.I64(task.work.cache_misses);
  w.F64(task.work.mean_loss);
  w.F64(task.work.statistical_utility);
  w.Proto(*task.delta);
  return w.Take();
}

absl::StatusOr<TrainedTask> DecodeTrainedTask(const std::string& bytes) {
  Reader r(bytes);
  TrainedTask t;
  FEDSCHED_ASSIGN_OR_RETURN(t.work.examples, r.I64("examples"));
  FEDSCHED_ASSIGN_OR_RETURN(t.work.cache_hits, r.I64("cache hits"));
  FEDSCHED_ASSIGN_OR_RETURN(t.work.cache_misses, r.I64("cache misses"));
  FEDSCHED_ASSIGN_OR_RETURN(t.work.mean_loss, r.F64("mean loss"));
  FEDSCHED_ASSIGN_OR_RETURN(t.work.statistical_utility, r.F64("statistical utility"));
  auto delta = std::make_shared<v1::Model>();
  FEDSCHED_RETURN_IF_ERROR(r.Proto("delta", delta.get()));
  t.delta = std::move(delta);
  FEDSCHED_RETURN_IF_ERROR(r.End("trained task"));
  return t;
}

}  // namespace fedsched::sim::mpi

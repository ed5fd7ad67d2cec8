// Line-oriented readers for trace files: CSV with a header, and flat JSON Lines objects.
// Every error names the file and the 1-based line ("path:line: ...").
#ifndef FEDSCHED_SIM_TRACE_TEXT_TABLE_H_
#define FEDSCHED_SIM_TRACE_TEXT_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fedsched::sim {

// Bounds on what a trace reader holds in memory: a trace beyond them is refused with an error
// naming the file and the bound, instead of growing until the process dies (each CSV row costs
// about 100 bytes of memory beyond its text; a window 16 bytes). Allocation failures while
// reading become RESOURCE_EXHAUSTED errors, never an abort.
struct TraceLimits {
  // Default: 1 GiB. Largest trace file read (bytes).
  int64_t max_file_bytes = int64_t{1} << 30;
  // Default: 10,000,000. Most data rows (CSV rows, JSON lines) in one trace file.
  int64_t max_rows = 10'000'000;
  // Default: 50,000,000. Most availability windows in one trace, over all its clients.
  int64_t max_windows = 50'000'000;
};

// The limits in force (process-wide; fedsched-sim's --max_trace_* flags set them at start).
TraceLimits GetTraceLimits();
// Replaces the limits. Call before any trace is read (not synchronised with readers).
void SetTraceLimits(const TraceLimits& limits);

// A CSV file split into a header and rows. Fields are separated by ','; a field may be enclosed
// in double quotes ("" inside quotes is one quote). Blank lines are skipped; "\r\n" is accepted.
// Immutable after Read; safe to share across threads.
class CsvTable {
 public:
  struct Row {
    int64_t line = 0;  // 1-based line number in the file
    std::vector<std::string> fields;
  };

  // Reads and splits `path`. Errors: NOT_FOUND if the file cannot be read; INVALID_ARGUMENT
  // "path:line: ..." for an empty file, an unterminated quote, or a row whose field count
  // differs from the header's; RESOURCE_EXHAUSTED beyond TraceLimits (bytes, rows) or when
  // memory runs out.
  [[nodiscard]] static absl::StatusOr<CsvTable> Read(const std::string& path);
  // As Read, on text already in memory; `source_name` is used in errors.
  [[nodiscard]] static absl::StatusOr<CsvTable> Parse(absl::string_view text,
                                                      const std::string& source_name);

  const std::string& source() const { return source_; }
  const std::vector<std::string>& header() const { return header_; }
  int64_t header_line() const { return header_line_; }
  const std::vector<Row>& rows() const { return rows_; }

  // Index of column `name` in the header, or -1.
  int ColumnIndex(absl::string_view name) const;
  // Index of the first of `names` present. Errors: INVALID_ARGUMENT "path:line: missing column
  // a|b" naming the header line.
  [[nodiscard]] absl::StatusOr<int> RequireColumn(
      const std::vector<absl::string_view>& names) const;

  // Field `col` of `row` parsed as a finite double / an integer. Errors: INVALID_ARGUMENT
  // "path:line: column 'name': not a number: 'text'".
  [[nodiscard]] absl::StatusOr<double> Double(const Row& row, int col) const;
  [[nodiscard]] absl::StatusOr<int64_t> Int(const Row& row, int col) const;

  // "path:line: " prefix for errors about `row`.
  std::string Where(const Row& row) const;

 private:
  [[nodiscard]] static absl::StatusOr<CsvTable> ParseUnguarded(absl::string_view text,
                                                               const std::string& source_name);

  std::string source_;
  std::vector<std::string> header_;
  int64_t header_line_ = 0;
  std::vector<Row> rows_;
};

// A value of a flat JSON object: number, string, bool, null (monostate) or an array of numbers.
using JsonValue = std::variant<std::monostate, double, std::string, bool, std::vector<double>>;
using JsonObject = std::map<std::string, JsonValue, std::less<>>;

// Parses one JSON object whose values are numbers, strings, booleans, null or arrays of numbers
// (what the trace converter writes). Errors: INVALID_ARGUMENT with the byte offset of the
// problem; the caller prefixes file:line.
[[nodiscard]] absl::StatusOr<JsonObject> ParseFlatJsonObject(absl::string_view text);

// Calls `fn(line_number, object)` for every non-blank line of the JSON Lines file `path`.
// Errors: NOT_FOUND if unreadable; INVALID_ARGUMENT "path:line: ..." on a malformed line;
// RESOURCE_EXHAUSTED beyond TraceLimits (bytes, rows) or when memory runs out;
// whatever `fn` returns (fn should prefix its own errors with path:line).
template <typename Fn>
[[nodiscard]] absl::Status ForEachJsonLine(const std::string& path, Fn fn);

// Reads `path` into memory. Errors: NOT_FOUND naming the path; RESOURCE_EXHAUSTED when it is
// larger than TraceLimits::max_file_bytes or memory runs out.
[[nodiscard]] absl::StatusOr<std::string> ReadTraceFile(const std::string& path);

// OK unless `path` is a file larger than TraceLimits::max_file_bytes: then RESOURCE_EXHAUSTED
// naming the path, the size, the bound and --max_trace_bytes. A file that cannot be stat'ed
// passes (its reader reports it).
[[nodiscard]] absl::Status CheckTraceFileBytes(const std::string& path);

// OK when `count` <= `limit`, else RESOURCE_EXHAUSTED "source: more than LIMIT WHAT (...)"
// naming `flag`, the fedsched-sim flag that sets the bound (e.g. "--max_trace_windows").
[[nodiscard]] absl::Status CheckTraceCount(const std::string& source, int64_t count, int64_t limit,
                                           absl::string_view what, absl::string_view flag);

// Parses a finite double from `text` (surrounding blanks allowed). Returns false otherwise.
bool ParseFiniteDouble(absl::string_view text, double* out);

// A client id that was read as a number, as an integer. Errors: INVALID_ARGUMENT starting with
// `where` (e.g. "file:line: ") when `value` is not a whole number in [0, 2^53], the range a
// double holds exactly (a plain cast of anything larger is undefined behaviour).
[[nodiscard]] absl::StatusOr<int64_t> ClientIdFromNumber(double value, absl::string_view where);

// Deterministic 64-bit mixing PRNG (splitmix64, Steele et al. 2014) used wherever a trace is
// shuffled or generated, so results do not depend on the standard library's distributions.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; bias < n / 2^64).
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

// ---- implementation of the template ----
[[nodiscard]] absl::Status ForEachJsonLineImpl(
    const std::string& path, const std::function<absl::Status(int64_t, const JsonObject&)>& fn);

template <typename Fn>
[[nodiscard]] absl::Status ForEachJsonLine(const std::string& path, Fn fn) {
  return ForEachJsonLineImpl(path, std::function<absl::Status(int64_t, const JsonObject&)>(fn));
}

}  // namespace fedsched::sim

#endif  // FEDSCHED_SIM_TRACE_TEXT_TABLE_H_

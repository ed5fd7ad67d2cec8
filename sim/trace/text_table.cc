#include "sim/trace/text_table.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace fedsched::sim {
namespace {

// Splits one CSV line into fields. Returns false on an unterminated quote.
bool SplitCsvLine(absl::string_view line, std::vector<std::string>* fields) {
  fields->clear();
  std::string current;
  bool in_quotes = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          current.push_back('"');
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        current.push_back(c);
      }
    } else if (c == '"') {
      in_quotes = true;
    } else if (c == ',') {
      fields->push_back(std::move(current));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (in_quotes) return false;
  fields->push_back(std::move(current));
  return true;
}

bool IsBlank(absl::string_view line) {
  for (char c : line) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Recursive-descent parser for the flat objects ParseFlatJsonObject accepts.
class JsonParser {
 public:
  explicit JsonParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<JsonObject> Object() {
    JsonObject out;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    SkipSpace();
    if (Consume('}')) return Finish(std::move(out));
    while (true) {
      SkipSpace();
      FEDSCHED_ASSIGN_OR_RETURN(std::string key, String());
      SkipSpace();
      if (!Consume(':')) return Error("expected ':'");
      SkipSpace();
      FEDSCHED_ASSIGN_OR_RETURN(JsonValue value, Value());
      if (out.count(key) != 0) return Error(absl::StrCat("duplicate key '", key, "'"));
      out.emplace(std::move(key), std::move(value));
      SkipSpace();
      if (Consume(',')) continue;
      if (Consume('}')) break;
      return Error("expected ',' or '}'");
    }
    return Finish(std::move(out));
  }

 private:
  absl::StatusOr<JsonObject> Finish(JsonObject out) {
    SkipSpace();
    if (pos_ != text_.size()) return Error("trailing characters after the object");
    return out;
  }

  absl::StatusOr<JsonValue> Value() {
    if (pos_ >= text_.size()) return Error("unexpected end of line");
    const char c = text_[pos_];
    if (c == '"') {
      FEDSCHED_ASSIGN_OR_RETURN(std::string s, String());
      return JsonValue(std::move(s));
    }
    if (c == '[') {
      ++pos_;
      std::vector<double> values;
      SkipSpace();
      if (Consume(']')) return JsonValue(std::move(values));
      while (true) {
        SkipSpace();
        FEDSCHED_ASSIGN_OR_RETURN(double v, Number());
        values.push_back(v);
        SkipSpace();
        if (Consume(',')) continue;
        if (Consume(']')) break;
        return Error("expected ',' or ']' in array");
      }
      return JsonValue(std::move(values));
    }
    if (Literal("true")) return JsonValue(true);
    if (Literal("false")) return JsonValue(false);
    if (Literal("null")) return JsonValue(std::monostate{});
    FEDSCHED_ASSIGN_OR_RETURN(double v, Number());
    return JsonValue(v);
  }

  absl::StatusOr<double> Number() {
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::strchr("+-0123456789.eE", text_[pos_]) != nullptr)) {
      ++pos_;
    }
    double v = 0;
    if (start == pos_ || !ParseFiniteDouble(text_.substr(start, pos_ - start), &v)) {
      pos_ = start;
      return Error("expected a finite number");
    }
    return v;
  }

  absl::StatusOr<std::string> String() {
    if (!Consume('"')) return Error("expected '\"'");
    std::string out;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (c == '\\') {
        if (pos_ >= text_.size()) break;
        const char e = text_[pos_++];
        switch (e) {
          case '"':
            out.push_back('"');
            break;
          case '\\':
            out.push_back('\\');
            break;
          case '/':
            out.push_back('/');
            break;
          case 'n':
            out.push_back('\n');
            break;
          case 't':
            out.push_back('\t');
            break;
          case 'r':
            out.push_back('\r');
            break;
          case 'b':
            out.push_back('\b');
            break;
          case 'f':
            out.push_back('\f');
            break;
          case 'u': {
            if (pos_ + 4 > text_.size()) return Error("short \\u escape");
            const unsigned long cp =
                std::strtoul(std::string(text_.substr(pos_, 4)).c_str(), nullptr, 16);
            pos_ += 4;
            // UTF-8 encode the BMP code point (surrogate pairs are not expected in traces).
            if (cp < 0x80) {
              out.push_back(static_cast<char>(cp));
            } else if (cp < 0x800) {
              out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
              out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
            } else {
              out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
              out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
              out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
            }
            break;
          }
          default:
            return Error("bad escape in string");
        }
      } else {
        out.push_back(c);
      }
    }
    return Error("unterminated string");
  }

  bool Literal(absl::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }
  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("JSON at byte ", pos_ + 1, ": ", what));
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

TraceLimits& MutableTraceLimits() {
  static TraceLimits limits;
  return limits;
}

absl::Status OutOfMemory(const std::string& source) {
  return absl::ResourceExhaustedError(absl::StrCat(
      source,
      ": out of memory while reading the trace; use a smaller trace (or a machine with "
      "more memory)"));
}

}  // namespace

TraceLimits GetTraceLimits() { return MutableTraceLimits(); }
void SetTraceLimits(const TraceLimits& limits) { MutableTraceLimits() = limits; }

absl::Status CheckTraceCount(const std::string& source, int64_t count, int64_t limit,
                             absl::string_view what, absl::string_view flag) {
  if (count <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      source, ": more than ", limit, " ", what, " (the trace readers' bound, fedsched-sim ", flag,
      "); cut or sample the trace, or raise the bound if the machine has the memory"));
}

bool ParseFiniteDouble(absl::string_view text, double* out) {
  std::string s(absl::StripAsciiWhitespace(text));
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

absl::Status CheckTraceFileBytes(const std::string& path) {
  const int64_t limit = GetTraceLimits().max_file_bytes;
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (!error && size > static_cast<uintmax_t>(limit)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, ": the trace file holds ", size, " bytes, more than ", limit,
        " (the trace readers' bound, fedsched-sim --max_trace_bytes); cut or sample the trace"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTraceFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open trace file: ", std::strerror(errno)));
  }
  FEDSCHED_RETURN_IF_ERROR(CheckTraceFileBytes(path));
  const int64_t limit = GetTraceLimits().max_file_bytes;
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  try {
    std::string text;
    text.reserve(error ? 0 : static_cast<size_t>(size));
    char chunk[1 << 16];
    while (in.read(chunk, sizeof(chunk)) || in.gcount() > 0) {
      // A pipe or a file still growing has no size to check up front.
      if (static_cast<int64_t>(text.size() + in.gcount()) > limit) {
        return absl::ResourceExhaustedError(
            absl::StrCat(path, ": the trace is longer than ", limit,
                         " bytes (the trace readers' bound, fedsched-sim --max_trace_bytes)"));
      }
      text.append(chunk, static_cast<size_t>(in.gcount()));
    }
    if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
    return text;
  } catch (const std::bad_alloc&) {
    return OutOfMemory(path);
  }
}

absl::StatusOr<CsvTable> CsvTable::Read(const std::string& path) {
  FEDSCHED_ASSIGN_OR_RETURN(std::string text, ReadTraceFile(path));
  return Parse(text, path);
}

absl::StatusOr<CsvTable> CsvTable::Parse(absl::string_view text, const std::string& source_name) {
  try {
    return ParseUnguarded(text, source_name);
  } catch (const std::bad_alloc&) {
    return OutOfMemory(source_name);
  }
}

absl::StatusOr<CsvTable> CsvTable::ParseUnguarded(absl::string_view text,
                                                  const std::string& source_name) {
  const int64_t max_rows = GetTraceLimits().max_rows;
  CsvTable table;
  table.source_ = source_name;
  int64_t line_no = 0;
  size_t pos = 0;
  std::vector<std::string> fields;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (IsBlank(line)) continue;
    if (!SplitCsvLine(line, &fields)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ":", line_no, ": unterminated quoted field"));
    }
    if (table.header_line_ == 0) {
      for (std::string& f : fields) f = std::string(absl::StripAsciiWhitespace(f));
      table.header_ = fields;
      table.header_line_ = line_no;
      continue;
    }
    if (fields.size() != table.header_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ":", line_no, ": expected ", table.header_.size(), " fields (",
                       absl::StrJoin(table.header_, ","), "), found ", fields.size()));
    }
    if (static_cast<int64_t>(table.rows_.size()) >= max_rows) {
      return CheckTraceCount(source_name, max_rows + 1, max_rows, "rows", "--max_trace_rows");
    }
    table.rows_.push_back(Row{line_no, fields});
  }
  if (table.header_line_ == 0) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ":1: empty file, no header"));
  }
  return table;
}

int CsvTable::ColumnIndex(absl::string_view name) const {
  for (size_t i = 0; i < header_.size(); ++i) {
    if (header_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<int> CsvTable::RequireColumn(const std::vector<absl::string_view>& names) const {
  for (absl::string_view n : names) {
    const int i = ColumnIndex(n);
    if (i >= 0) return i;
  }
  return absl::InvalidArgumentError(absl::StrCat(source_, ":", header_line_, ": missing column ",
                                                 absl::StrJoin(names, "|"), " in header '",
                                                 absl::StrJoin(header_, ","), "'"));
}

std::string CsvTable::Where(const Row& row) const {
  return absl::StrCat(source_, ":", row.line, ": ");
}

absl::StatusOr<double> CsvTable::Double(const Row& row, int col) const {
  double v = 0;
  if (!ParseFiniteDouble(row.fields[col], &v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(row), "column '", header_[col], "': not a finite number: '", row.fields[col], "'"));
  }
  return v;
}

absl::StatusOr<int64_t> CsvTable::Int(const Row& row, int col) const {
  std::string s(absl::StripAsciiWhitespace(row.fields[col]));
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE) {
    return absl::InvalidArgumentError(absl::StrCat(Where(row), "column '", header_[col],
                                                   "': not an integer: '", row.fields[col], "'"));
  }
  return static_cast<int64_t>(v);
}

absl::StatusOr<JsonObject> ParseFlatJsonObject(absl::string_view text) {
  return JsonParser(text).Object();
}

namespace {

absl::Status ForEachJsonLineUnguarded(
    const std::string& path, const std::function<absl::Status(int64_t, const JsonObject&)>& fn) {
  FEDSCHED_ASSIGN_OR_RETURN(std::string text, ReadTraceFile(path));
  const int64_t max_rows = GetTraceLimits().max_rows;
  int64_t rows = 0;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    absl::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (IsBlank(line)) continue;
    if (++rows > max_rows) {
      return CheckTraceCount(path, rows, max_rows, "rows", "--max_trace_rows");
    }
    absl::StatusOr<JsonObject> object = ParseFlatJsonObject(line);
    if (!object.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": ", object.status().message()));
    }
    FEDSCHED_RETURN_IF_ERROR(fn(line_no, *object));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ForEachJsonLineImpl(
    const std::string& path, const std::function<absl::Status(int64_t, const JsonObject&)>& fn) {
  try {
    return ForEachJsonLineUnguarded(path, fn);
  } catch (const std::bad_alloc&) {
    return OutOfMemory(path);
  }
}

uint64_t SplitMix64::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

absl::StatusOr<int64_t> ClientIdFromNumber(double value, absl::string_view where) {
  constexpr double kMaxExact = 9007199254740992.0;  // 2^53
  if (!(value >= 0 && value <= kMaxExact) || value != std::floor(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "client id ", value, " is not a whole number in [0, 2^53]"));
  }
  return static_cast<int64_t>(value);
}

}  // namespace fedsched::sim

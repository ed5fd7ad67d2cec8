#include "secagg/shamir.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace fedsched::secagg {
namespace {

constexpr int kChunkBytes = 7;

uint64_t Reduce(unsigned __int128 v) {
  // 2^61 = 1 mod p: fold the high bits onto the low ones twice, then subtract p once.
  uint64_t lo = static_cast<uint64_t>(v & kFieldPrime);
  uint64_t hi = static_cast<uint64_t>(v >> 61);
  uint64_t r = lo + (hi & kFieldPrime) + (hi >> 61);
  r = (r & kFieldPrime) + (r >> 61);
  return r >= kFieldPrime ? r - kFieldPrime : r;
}

uint64_t Add(uint64_t a, uint64_t b) { return Reduce(static_cast<unsigned __int128>(a) + b); }
uint64_t Sub(uint64_t a, uint64_t b) { return Add(a, kFieldPrime - b); }
uint64_t Mul(uint64_t a, uint64_t b) { return Reduce(static_cast<unsigned __int128>(a) * b); }

uint64_t Inverse(uint64_t a) {
  // Fermat: a^(p-2) for a != 0.
  uint64_t result = 1;
  uint64_t base = a;
  for (uint64_t e = kFieldPrime - 2; e > 0; e >>= 1) {
    if (e & 1) result = Mul(result, base);
    base = Mul(base, base);
  }
  return result;
}

// Chunk c holds secret bytes [7c, 7c+7), big-endian; the last chunk holds 4 bytes.
uint64_t Chunk(const Bytes32& secret, int c) {
  uint64_t v = 0;
  for (int i = c * kChunkBytes; i < std::min<int>(32, (c + 1) * kChunkBytes); ++i) {
    v = (v << 8) | secret[i];
  }
  return v;
}

absl::Status CheckPoints(absl::Span<const uint64_t> xs) {
  absl::flat_hash_set<uint64_t> seen;
  for (uint64_t x : xs) {
    if (x == 0 || x >= kFieldPrime) {
      return absl::InvalidArgumentError(absl::StrCat("shamir: point ", x, " is outside [1, p)"));
    }
    if (!seen.insert(x).second) {
      return absl::InvalidArgumentError(absl::StrCat("shamir: point ", x, " repeats"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Share>> ShamirSplit(const Bytes32& secret, int threshold,
                                               absl::Span<const uint64_t> xs, Drbg& rng) {
  if (threshold < 1 || threshold > static_cast<int>(xs.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("shamir: threshold ", threshold, " is not in [1, ", xs.size(), "]"));
  }
  if (absl::Status s = CheckPoints(xs); !s.ok()) return s;
  std::vector<Share> shares(xs.size());
  for (size_t h = 0; h < xs.size(); ++h) {
    shares[h].x = xs[h];
    shares[h].values.resize(kChunksPerSecret);
  }
  std::vector<uint64_t> coefficients(threshold);
  for (int c = 0; c < kChunksPerSecret; ++c) {
    coefficients[0] = Chunk(secret, c);
    for (int d = 1; d < threshold; ++d) coefficients[d] = rng.Uniform(kFieldPrime);
    for (Share& share : shares) {
      uint64_t y = 0;  // Horner
      for (int d = threshold - 1; d >= 0; --d) y = Add(Mul(y, share.x), coefficients[d]);
      share.values[c] = y;
    }
  }
  return shares;
}

absl::StatusOr<Bytes32> ShamirCombine(absl::Span<const Share> shares, int threshold) {
  if (threshold < 1 || static_cast<int>(shares.size()) < threshold) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shamir: ", shares.size(), " shares cannot rebuild a secret of threshold ", threshold));
  }
  std::vector<uint64_t> xs;
  for (int i = 0; i < threshold; ++i) {
    if (shares[i].values.size() != kChunksPerSecret) {
      return absl::InvalidArgumentError(absl::StrCat("shamir: share at point ", shares[i].x,
                                                     " has ", shares[i].values.size(),
                                                     " values, expected ", kChunksPerSecret));
    }
    for (uint64_t v : shares[i].values) {
      if (v >= kFieldPrime) return absl::InvalidArgumentError("shamir: value outside the field");
    }
    xs.push_back(shares[i].x);
  }
  if (absl::Status s = CheckPoints(xs); !s.ok()) return s;
  // Lagrange basis at 0: l_i = prod_{j != i} x_j / (x_j - x_i).
  std::vector<uint64_t> basis(threshold);
  for (int i = 0; i < threshold; ++i) {
    uint64_t num = 1, den = 1;
    for (int j = 0; j < threshold; ++j) {
      if (j == i) continue;
      num = Mul(num, xs[j]);
      den = Mul(den, Sub(xs[j], xs[i]));
    }
    basis[i] = Mul(num, Inverse(den));
  }
  Bytes32 secret{};
  for (int c = 0; c < kChunksPerSecret; ++c) {
    uint64_t v = 0;
    for (int i = 0; i < threshold; ++i) v = Add(v, Mul(basis[i], shares[i].values[c]));
    const int first = c * kChunkBytes;
    const int bytes = std::min(32, first + kChunkBytes) - first;
    if (bytes < 8 && (v >> (8 * bytes)) != 0) {
      return absl::InvalidArgumentError("shamir: the shares do not rebuild a valid secret");
    }
    for (int i = bytes - 1; i >= 0; --i, v >>= 8) secret[first + i] = static_cast<uint8_t>(v);
  }
  return secret;
}

}  // namespace fedsched::secagg

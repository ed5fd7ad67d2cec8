// Little-endian bit packing of masked inputs (secagg/packing.h).
#include "secagg/packing.h"

#include "absl/strings/str_cat.h"

namespace fedsched::secagg {

std::string PackBits(absl::Span<const uint32_t> values, uint32_t bits) {
  std::string out(PackedBytes(values.size(), bits), '\0');
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t acc = 0;  // pending bits, the next byte's lowest first
  int held = 0;      // how many (< 8 between elements)
  size_t at = 0;
  for (uint32_t v : values) {
    acc |= (v & mask) << held;
    held += static_cast<int>(bits);
    for (; held >= 8; held -= 8, acc >>= 8) out[at++] = static_cast<char>(acc & 0xff);
  }
  if (held > 0) out[at] = static_cast<char>(acc & 0xff);
  return out;
}

absl::Status UnpackBits(absl::string_view packed, uint32_t bits, absl::Span<uint32_t> out) {
  const uint64_t expected = PackedBytes(out.size(), bits);
  if (packed.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("secagg: a packed vector of ", out.size(),
                                                   " elements at ", bits, " bits is ", expected,
                                                   " bytes, got ", packed.size()));
  }
  const int spare = static_cast<int>(expected * 8 - uint64_t{out.size()} * bits);
  if (spare > 0 && (static_cast<uint8_t>(packed.back()) >> (8 - spare)) != 0) {
    return absl::InvalidArgumentError(
        "secagg: the unused high bits of a packed vector's last byte are not zero");
  }
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t acc = 0;
  int held = 0;
  size_t at = 0;
  for (uint32_t& v : out) {
    for (; held < static_cast<int>(bits); held += 8) {
      acc |= uint64_t{static_cast<uint8_t>(packed[at++])} << held;
    }
    v = static_cast<uint32_t>(acc & mask);
    acc >>= bits;
    held -= static_cast<int>(bits);
  }
  return absl::OkStatus();
}

}  // namespace fedsched::secagg

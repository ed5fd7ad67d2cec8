// The wire form of a masked input below 32 bits per element (SecAggMaskedInput.packed_masked,
// docs/guides/SECURE_AGGREGATION.md "Bits per element"): elements of Z_2^b packed at b bits
// each, little-endian. Element i occupies bits i*b .. i*b+b-1 of the byte string, bit j of the
// string being bit (j mod 8) of byte (j div 8); the unused high bits of the last byte are zero.
#ifndef FEDSCHED_SECAGG_PACKING_H_
#define FEDSCHED_SECAGG_PACKING_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fedsched::secagg {

// Bytes of `count` elements packed at `bits` each: ceil(count * bits / 8).
inline uint64_t PackedBytes(uint64_t count, uint32_t bits) { return (count * bits + 7) / 8; }

// The low `bits` (1..32) of each of `values`, packed as above (higher bits are ignored).
std::string PackBits(absl::Span<const uint32_t> values, uint32_t bits);

// Unpacks `out.size()` elements of `bits` (1..32) each from `packed` into `out`. Errors (invalid
// argument): `packed` is not PackedBytes(out.size(), bits) bytes, or the unused high bits of its
// last byte are not zero.
[[nodiscard]] absl::Status UnpackBits(absl::string_view packed, uint32_t bits,
                                      absl::Span<uint32_t> out);

}  // namespace fedsched::secagg

#endif  // FEDSCHED_SECAGG_PACKING_H_

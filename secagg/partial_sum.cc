#include "secagg/partial_sum.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "secagg/packing.h"
#include "secagg/protocol.h"

namespace fedsched::secagg {

absl::Status MaskedPartialSum::Add(const fedsched::v1::SecAggMaskedInput& input) {
  FEDSCHED_RETURN_IF_ERROR(CheckRound(round_id_, input.round_id(), "a masked input"));
  std::vector<uint32_t> unpacked;
  const uint32_t* masked = input.masked().data();
  if (bits_ < 32) {
    unpacked.resize(sum_.size());
    if (input.masked_size() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("secagg partial sum: masked input from client ", input.sender(),
                       " is not packed at ", bits_, " bits"));
    }
    FEDSCHED_RETURN_IF_ERROR(UnpackBits(input.packed_masked(), bits_, absl::MakeSpan(unpacked)));
    masked = unpacked.data();
  } else if (static_cast<size_t>(input.masked_size()) != sum_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("secagg partial sum: masked input from client ",
                                                   input.sender(), " has ", input.masked_size(),
                                                   " elements, expected ", sum_.size()));
  }
  if (!senders_.insert(input.sender()).second) {
    return absl::InvalidArgumentError(absl::StrCat("secagg partial sum: client ", input.sender(),
                                                   " already sent a masked input"));
  }
  for (size_t e = 0; e < sum_.size(); ++e) sum_[e] += masked[e];
  return absl::OkStatus();
}

fedsched::v1::SecAggMaskedPartialSum MaskedPartialSum::Take() {
  fedsched::v1::SecAggMaskedPartialSum out;
  out.set_round_id(round_id_);
  out.mutable_senders()->Add(senders_.begin(), senders_.end());
  out.mutable_masked_sum()->Add(sum_.begin(), sum_.end());
  senders_.clear();
  std::fill(sum_.begin(), sum_.end(), 0);
  return out;
}

}  // namespace fedsched::secagg

// The client SDK's secure-aggregation state for one task (docs/guides/SECURE_AGGREGATION.md "Over
// the wire"): the protocol's client state machine (secagg::SecAggClient, Bonawitz et al., CCS 2017,
// section 4) and the sealed shares routed to it, kept from the key steps to the masked upload.
#ifndef FEDSCHED_CLIENT_SDK_CLIENT_SECAGG_H_
#define FEDSCHED_CLIENT_SDK_CLIENT_SECAGG_H_

#include "fedsched/v1/secagg.pb.h"
#include "secagg/client.h"

namespace fedsched {

// Fields: `client`, the round's SecAggClient (its index and keys); `routed`, the shares its
// neighbours sealed for it (step 1's output, step 2's input).
struct SecAggSession {
  secagg::SecAggClient client;
  v1::SecAggRoutedShares routed;
};

}  // namespace fedsched

#endif  // FEDSCHED_CLIENT_SDK_CLIENT_SECAGG_H_

// fedsched-enroll's operations on a stopped server's store (docs/guides/SECURITY.md "Operator
// procedures"). Each refuses a store that a running server holds, prints what it did on stdout
// and why it failed on stderr, and returns the tool's exit code.
#ifndef FEDSCHED_SERVER_ENROLL_STORE_OPS_H_
#define FEDSCHED_SERVER_ENROLL_STORE_OPS_H_

#include <string>

namespace fedsched {

// Re-enrols `identity` in the store at `path`: clears its credential or certificate binding, its
// signing key (ClientProfile.signing_public_key) and its secure-aggregation exclusion, and lifts
// its revocation; its profile and history stay.
// Returns 0 done, 1 the store knows no such identity (and holds no revocation of it), 2 the
// store cannot be used (missing, in use by a server, not private, unreadable).
int ResetIdentity(const std::string& path, const std::string& identity);

// Revokes `identity` in the store at `path`, known to it or not: the server then refuses its
// registrations whatever it presents, until ResetIdentity. Returns 0 done (or already revoked),
// 2 the store cannot be used.
int RevokeIdentity(const std::string& path, const std::string& identity);

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_ENROLL_STORE_OPS_H_

// Provisioning a fedsched deployment in one step (docs/guides/PROVISIONING.md): a CA, the
// server's, aggregators', devices' and operator's certificates, the enrolment key and each
// device's enrolment secret, the operator token, aggregator tokens, one startup kit (config and
// the files it names) per site and per device, and the Kubernetes Secrets of deploy/k8s.
// Thread-compatible; the output folder is the caller's alone while Provision runs.
#ifndef FEDSCHED_SERVER_PROVISION_PROVISION_H_
#define FEDSCHED_SERVER_PROVISION_PROVISION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fedsched/v1/config.pb.h"

namespace fedsched::provision {

// How devices prove their identity to the server (docs/guides/SECURITY.md "Identities and
// admission").
enum class DeviceAuth {
  // A client certificate whose CN is the identity (mutual TLS) and the enrolment secret, as the
  // Kubernetes manifests (deploy/k8s/configmap.yaml) configure the server.
  kCertificateAndKey,
  // The enrolment secret only; the server authenticates itself by TLS, devices hold no certificate.
  kEnrolmentKey,
  // The client certificate only (mutual TLS, no enrolment key). Not with aggregators: the root
  // cannot see devices' certificates through them (docs/guides/OPERATIONS.md "Hierarchical
  // aggregation").
  kCertificate,
};

// Parses "certificate_and_key", "enrolment_key" or "certificate". Errors: INVALID_ARGUMENT
// listing the accepted names.
[[nodiscard]] absl::StatusOr<DeviceAuth> ParseDeviceAuth(absl::string_view name);

// An aggregator of a hierarchy (docs/guides/OPERATIONS.md "Hierarchical aggregation").
struct AggregatorSpec {
  std::string id;    // hierarchy.aggregator_id and its certificate's CN; a plain file name.
  std::string host;  // DNS name or IP literal devices dial; in its certificate. Default: id.
  int port = 0;      // Its coordination port. Default: ProvisionOptions.port + 1 + its index.
};

// Parses "ID[=HOST[:PORT]]" (an IPv6 HOST is not supported in this form). Errors:
// INVALID_ARGUMENT naming the entry.
[[nodiscard]] absl::StatusOr<AggregatorSpec> ParseAggregatorSpec(absl::string_view entry);

struct ProvisionOptions {
  // Folder to create (mode 0700). Required. It must not exist, unless `force` and it holds a
  // previous fedsched-provision output (its README.txt), which is then replaced whole.
  std::string out_dir;
  bool force = false;  // Default: false.
  // DNS names and IP literals of the server (root), all in its certificate; the first is the
  // address devices, aggregators and the operator dial. Default: {"127.0.0.1", "localhost"}.
  std::vector<std::string> server_names;
  int port = 50051;                         // The server's coordination port. Default: 50051.
  std::string listen_host = "0.0.0.0";      // Sites' listen_address host. Default: "0.0.0.0".
  std::vector<AggregatorSpec> aggregators;  // Default: none (a flat deployment).
  // Device identities (each a kit folder name and, with certificates, a CN of at most 64
  // characters; docs/guides/SECURITY.md). At least one.
  std::vector<std::string> devices;
  DeviceAuth device_auth = DeviceAuth::kCertificateAndKey;
  int validity_days = 365;              // Server, aggregator, device and operator certificates.
  int ca_validity_days = 3650;          // The CA. Must be >= validity_days.
  std::string ca_name = "fedsched CA";  // The CA's CN.
  // Round, model, aggregation and security settings the server's kit starts from; provisioning
  // sets listen_address, transport TLS paths, security key and token paths, hierarchy, and
  // store_path when empty ("store"). Aggregators copy its aggregation and security sections and
  // its transport limits. Default: empty (the server's defaults).
  v1::ServerConfig server_base;
  // What every device's kit starts from (data, limits, ...); provisioning sets server_address,
  // fallback_addresses, identity, state_dir and transport TLS paths, and data.partition_index to
  // the device's index modulo data.num_partitions (num_partitions = the device count when unset).
  v1::ClientConfig client_base;
  std::string k8s_namespace;  // metadata.namespace of the Secrets. Default: none.
  // Where the server's kit will live, e.g. "/etc/fedsched" for the Debian package's systemd unit
  // (which runs in /var/lib/fedsched): its config then names its TLS files, secrets and
  // aggregator tokens by absolute paths under this folder. Default: empty (paths relative to
  // the kit, for its start.sh).
  std::string server_dir;
  // A previous output whose CA, enrolment key, operator token and aggregator tokens (by id) are
  // reused, so that kits already deployed keep working beside the new ones (adding devices or
  // aggregators, renewing certificates). Its private files must be this user's, mode 0600.
  // Default: empty (all new).
  std::string reuse_dir;
};

// What Provision wrote, for the tool's summary.
struct ProvisionResult {
  std::string out_dir;
  std::vector<std::string> kits;  // Relative folders: "server", "operator", "aggregators/ID", ...
};

// Writes the whole output tree (docs/guides/PROVISIONING.md "What it makes") into
// `options.out_dir`: first into a temporary sibling folder, renamed into place once complete, so
// a failure leaves nothing half-made. Private keys, tokens and secrets are 0600 in 0700 folders.
// Errors: INVALID_ARGUMENT naming a bad option (no devices, a bad name, duplicate ids or ports,
// certificate-only admission with aggregators, a relative server_dir, ...); from `reuse_dir`:
// NOT_FOUND for a missing CA, FAILED_PRECONDITION for a private file open to others,
// INVALID_ARGUMENT for a CA key and certificate that do not belong together; ALREADY_EXISTS when
// `out_dir` exists and `force` is off; FAILED_PRECONDITION when `force` is on but `out_dir` is not
// a previous output; NOT_FOUND when the folder that should hold `out_dir` does not exist;
// INTERNAL / PERMISSION_DENIED naming a file that cannot be written.
[[nodiscard]] absl::StatusOr<ProvisionResult> Provision(const ProvisionOptions& options);

}  // namespace fedsched::provision

#endif  // FEDSCHED_SERVER_PROVISION_PROVISION_H_

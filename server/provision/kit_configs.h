// The configs of the startup kits fedsched-provision writes (docs/guides/PROVISIONING.md): pure
// functions from the options to ServerConfig / ClientConfig messages whose paths are relative to
// the kit's folder (each kit's start.sh runs from there).
#ifndef FEDSCHED_SERVER_PROVISION_KIT_CONFIGS_H_
#define FEDSCHED_SERVER_PROVISION_KIT_CONFIGS_H_

#include <string>

#include "fedsched/v1/config.pb.h"
#include "server/provision/provision.h"

namespace fedsched::provision {

// File names inside a kit, shared by the configs, the writer and the Kubernetes Secrets.
inline constexpr char kCaFile[] = "tls/ca.crt";
inline constexpr char kCertFile[] = "tls/tls.crt";
inline constexpr char kKeyFile[] = "tls/tls.key";
inline constexpr char kEnrolmentKeyFile[] = "secrets/enrolment.key";
inline constexpr char kOperatorTokenFile[] = "secrets/operator.token";
inline constexpr char kUpstreamTokenFile[] = "secrets/upstream.token";
inline constexpr char kAggregatorTokenDir[] = "aggregator_tokens";
inline constexpr char kStateDir[] = "state";

// True when devices present client certificates under `auth`.
bool DevicesHaveCertificates(DeviceAuth auth);
// True when the server holds an enrolment key under `auth`.
bool UsesEnrolmentKey(DeviceAuth auth);

// "host:port" of the server as devices, aggregators and the operator dial it.
std::string ServerAddress(const ProvisionOptions& options);
// "host:port" of aggregator `a`.
std::string AggregatorAddress(const AggregatorSpec& a);

// The server's (root's, with aggregators) config: `options.server_base` with listen_address,
// store_path (when empty), TLS (mutual when devices have certificates and there is no
// aggregator), the enrolment key and operator token paths, and hierarchy ROLE_ROOT with its
// aggregator token folder when there are aggregators. Paths are under `options.server_dir` when
// it is set, else relative to the kit.
v1::ServerConfig ServerKitConfig(const ProvisionOptions& options);

// Aggregator `index`'s config: its listen address, TLS (its certificate serves devices and is
// presented to the root; devices' certificates required when they have them), the base config's
// aggregation, security (without paths) and transport limits, and hierarchy ROLE_AGGREGATOR.
v1::ServerConfig AggregatorKitConfig(const ProvisionOptions& options, int index);

// Device `index`'s config: `options.client_base` with its endpoint (its aggregator, index modulo
// their count, then the other aggregators and the root as fallbacks), identity, state dir, TLS
// and data partition.
v1::ClientConfig DeviceKitConfig(const ProvisionOptions& options, int index);

}  // namespace fedsched::provision

#endif  // FEDSCHED_SERVER_PROVISION_KIT_CONFIGS_H_

#include "server/provision/kit_configs.h"

#include "absl/strings/str_cat.h"

namespace fedsched::provision {
namespace {

// "host:port", with an IPv6 literal in brackets.
std::string HostPort(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                             : absl::StrCat(host, ":", port);
}

// The base transport's limits and keepalive with TLS set to the kit's files.
v1::TransportConfig KitTransport(const v1::TransportConfig& base, bool own_certificate,
                                 bool with_ca, bool require_client_cert) {
  v1::TransportConfig t = base;
  t.clear_tls_cert_path();
  t.clear_tls_key_path();
  t.clear_tls_ca_path();
  t.clear_require_client_cert();
  if (own_certificate) {
    t.set_tls_cert_path(kCertFile);
    t.set_tls_key_path(kKeyFile);
  }
  if (with_ca) t.set_tls_ca_path(kCaFile);
  if (require_client_cert) t.set_require_client_cert(true);
  return t;
}

}  // namespace

bool DevicesHaveCertificates(DeviceAuth auth) { return auth != DeviceAuth::kEnrolmentKey; }

bool UsesEnrolmentKey(DeviceAuth auth) { return auth != DeviceAuth::kCertificate; }

std::string ServerAddress(const ProvisionOptions& options) {
  return HostPort(options.server_names.front(), options.port);
}

std::string AggregatorAddress(const AggregatorSpec& a) { return HostPort(a.host, a.port); }

v1::ServerConfig ServerKitConfig(const ProvisionOptions& options) {
  v1::ServerConfig config = options.server_base;
  const bool flat = options.aggregators.empty();
  const bool mutual = flat && DevicesHaveCertificates(options.device_auth);
  // A file of the kit as the server names it: relative to the kit, or under server_dir.
  const auto at = [&](const char* relative) {
    return options.server_dir.empty() ? std::string(relative)
                                      : absl::StrCat(options.server_dir, "/", relative);
  };
  config.set_listen_address(HostPort(options.listen_host, options.port));
  if (config.store_path().empty()) config.set_store_path("store");
  v1::TransportConfig* t = config.mutable_transport();
  *t = KitTransport(config.transport(), /*own_certificate=*/true, /*with_ca=*/mutual, mutual);
  t->set_tls_cert_path(at(kCertFile));
  t->set_tls_key_path(at(kKeyFile));
  if (mutual) t->set_tls_ca_path(at(kCaFile));
  v1::SecurityConfig* security = config.mutable_security();
  security->clear_enrolment_key_path();
  if (UsesEnrolmentKey(options.device_auth)) {
    security->set_enrolment_key_path(at(kEnrolmentKeyFile));
  }
  security->set_operator_token_path(at(kOperatorTokenFile));
  config.clear_hierarchy();
  if (!flat) {
    config.mutable_hierarchy()->set_role(v1::HierarchyConfig::ROLE_ROOT);
    config.mutable_hierarchy()->set_aggregator_token_dir(at(kAggregatorTokenDir));
  }
  return config;
}

v1::ServerConfig AggregatorKitConfig(const ProvisionOptions& options, int index) {
  const AggregatorSpec& a = options.aggregators[index];
  v1::ServerConfig config;
  config.set_listen_address(HostPort(options.listen_host, a.port));
  *config.mutable_transport() =
      KitTransport(options.server_base.transport(), /*own_certificate=*/true, /*with_ca=*/true,
                   DevicesHaveCertificates(options.device_auth));
  if (options.server_base.has_aggregation()) {
    *config.mutable_aggregation() = options.server_base.aggregation();
  }
  if (options.server_base.has_security()) {
    *config.mutable_security() = options.server_base.security();
    config.mutable_security()->clear_enrolment_key_path();
    config.mutable_security()->clear_operator_token_path();
  }
  v1::HierarchyConfig* h = config.mutable_hierarchy();
  h->set_role(v1::HierarchyConfig::ROLE_AGGREGATOR);
  h->set_upstream_address(ServerAddress(options));
  h->set_upstream_token_path(kUpstreamTokenFile);
  h->set_aggregator_id(a.id);
  return config;
}

v1::ClientConfig DeviceKitConfig(const ProvisionOptions& options, int index) {
  v1::ClientConfig config = options.client_base;
  config.clear_fallback_addresses();
  const int n = static_cast<int>(options.aggregators.size());
  if (n == 0) {
    config.set_server_address(ServerAddress(options));
  } else {
    config.set_server_address(AggregatorAddress(options.aggregators[index % n]));
    for (int k = 1; k < n; ++k) {
      config.add_fallback_addresses(AggregatorAddress(options.aggregators[(index + k) % n]));
    }
    config.add_fallback_addresses(ServerAddress(options));
  }
  config.set_identity(options.devices[index]);
  config.set_state_dir(kStateDir);
  *config.mutable_transport() =
      KitTransport(config.transport(), DevicesHaveCertificates(options.device_auth),
                   /*with_ca=*/true, /*require_client_cert=*/false);
  v1::DataConfig* data = config.mutable_data();
  if (data->num_partitions() <= 0) {
    data->set_num_partitions(static_cast<int32_t>(options.devices.size()));
  }
  data->set_partition_index(index % data->num_partitions());
  return config;
}

}  // namespace fedsched::provision

// fedsched-provision: makes everything a fedsched deployment needs to run over TLS in one step
// (docs/guides/PROVISIONING.md): a CA; the server's certificate for the names devices dial;
// certificates for aggregators, devices and the operator; the enrolment key and each device's
// enrolment secret; the operator token; aggregator tokens; a startup kit per site and per device
// (config plus the files it names, and a start script); and the Kubernetes Secrets deploy/k8s
// mounts.
//
//   fedsched-provision --out=DIR --server_names=fl.example.com,10.0.0.5 --device_count=3
//   fedsched-provision --out=DIR --devices=cam-1,cam-2 --aggregators=agg-1=agg-1.example.com:50061
//   fedsched-provision --out=DIR2 --reuse=DIR --device_count=5     (same CA and keys, more devices)
//
// Exits 0 having written DIR, or 2 with an error message (nothing written).

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/flags_usage.h"
#include "common/status_macros.h"
#include "server/provision/provision.h"

ABSL_FLAG(std::string, out, "",
          "Folder to create with the CA, the kits and the Kubernetes Secrets (required; must not "
          "exist).");
ABSL_FLAG(bool, force, false, "Replace --out if it holds a previous fedsched-provision output.");
ABSL_FLAG(std::vector<std::string>, server_names,
          std::vector<std::string>({"127.0.0.1", "localhost"}),
          "DNS names and IP addresses of the server, all in its certificate; the first is the "
          "address devices, aggregators and the operator dial.");
ABSL_FLAG(int32_t, port, 50051, "The server's coordination port.");
ABSL_FLAG(std::string, listen_host, "0.0.0.0",
          "Host part of the sites' listen_address (0.0.0.0: every interface).");
ABSL_FLAG(std::vector<std::string>, aggregators, {},
          "Aggregators of a hierarchy, each ID[=HOST[:PORT]] (HOST defaults to ID, PORT to --port "
          "+ 1 + its position).");
ABSL_FLAG(std::vector<std::string>, devices, {}, "Device identities, one kit each.");
ABSL_FLAG(int32_t, device_count, 0,
          "Devices named PREFIX-001 ... (--device_prefix), added after --devices.");
ABSL_FLAG(std::string, device_prefix, "device", "Name prefix of --device_count's devices.");
ABSL_FLAG(std::string, device_auth, "certificate_and_key",
          "What devices prove their identity with: certificate_and_key (client certificate and "
          "enrolment secret, as deploy/k8s configures the server), enrolment_key (secret only; "
          "TLS to the server) or certificate (client certificate only; not with aggregators).");
ABSL_FLAG(int32_t, validity_days, 365,
          "Validity of the server, aggregator, device and "
          "operator certificates, days.");
ABSL_FLAG(int32_t, ca_validity_days, 3650, "Validity of the CA, days.");
ABSL_FLAG(std::string, ca_name, "fedsched CA", "Common name of the CA.");
ABSL_FLAG(std::string, server_config, "",
          "A ServerConfig textproto the server's kit starts from (rounds, model, aggregation, "
          "security); provisioning sets its listen address, TLS, secrets and hierarchy.");
ABSL_FLAG(std::string, client_config, "",
          "A ClientConfig textproto every device's kit starts from (data, limits); provisioning "
          "sets its address, identity, state dir, TLS and data partition.");
ABSL_FLAG(std::string, k8s_namespace, "", "metadata.namespace of the Kubernetes Secrets.");
ABSL_FLAG(std::string, server_dir, "",
          "Absolute folder the server's kit will be installed in (e.g. /etc/fedsched for the "
          "Debian package's systemd unit): its config then names its files there. Default: paths "
          "relative to the kit (its start.sh).");
ABSL_FLAG(std::string, reuse, "",
          "A previous output folder whose CA, enrolment key, operator token and aggregator tokens "
          "are kept, so that deployed kits keep working (add devices, renew certificates).");

namespace {

using ::fedsched::provision::ProvisionOptions;

absl::StatusOr<ProvisionOptions> OptionsFromFlags() {
  ProvisionOptions o;
  o.out_dir = absl::GetFlag(FLAGS_out);
  o.force = absl::GetFlag(FLAGS_force);
  o.server_names = absl::GetFlag(FLAGS_server_names);
  o.port = absl::GetFlag(FLAGS_port);
  o.listen_host = absl::GetFlag(FLAGS_listen_host);
  for (const std::string& entry : absl::GetFlag(FLAGS_aggregators)) {
    FEDSCHED_ASSIGN_OR_RETURN(o.aggregators.emplace_back(),
                              fedsched::provision::ParseAggregatorSpec(entry));
  }
  o.devices = absl::GetFlag(FLAGS_devices);
  const int count = absl::GetFlag(FLAGS_device_count);
  if (count < 0 || count > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device_count=", count, " is outside [0, 1000000]"));
  }
  const int width = std::max<int>(3, static_cast<int>(std::to_string(count).size()));
  for (int i = 1; i <= count; ++i) {
    std::string number = std::to_string(i);
    number.insert(0, width - number.size(), '0');
    o.devices.push_back(absl::StrCat(absl::GetFlag(FLAGS_device_prefix), "-", number));
  }
  FEDSCHED_ASSIGN_OR_RETURN(o.device_auth,
                            fedsched::provision::ParseDeviceAuth(absl::GetFlag(FLAGS_device_auth)));
  o.validity_days = absl::GetFlag(FLAGS_validity_days);
  o.ca_validity_days = absl::GetFlag(FLAGS_ca_validity_days);
  o.ca_name = absl::GetFlag(FLAGS_ca_name);
  if (const std::string path = absl::GetFlag(FLAGS_server_config); !path.empty()) {
    FEDSCHED_RETURN_IF_ERROR(fedsched::LoadTextConfig(path, &o.server_base));
  }
  if (const std::string path = absl::GetFlag(FLAGS_client_config); !path.empty()) {
    FEDSCHED_RETURN_IF_ERROR(fedsched::LoadTextConfig(path, &o.client_base));
  }
  o.k8s_namespace = absl::GetFlag(FLAGS_k8s_namespace);
  o.server_dir = absl::GetFlag(FLAGS_server_dir);
  o.reuse_dir = absl::GetFlag(FLAGS_reuse);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  fedsched::SetUsage(
      "Makes a CA, certificates, enrolment material, the operator token, a startup kit per site "
      "and per device, and Kubernetes Secrets (docs/guides/PROVISIONING.md):\n"
      "  fedsched-provision --out=DIR [--server_names=NAME,...] [--port=P] "
      "(--devices=ID,... | --device_count=N) [--aggregators=ID[=HOST[:PORT]],...]");
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::fprintf(stderr, "fedsched-provision: unexpected argument '%s' (see --help)\n", rest[1]);
    return 2;
  }
  absl::StatusOr<ProvisionOptions> options = OptionsFromFlags();
  absl::StatusOr<fedsched::provision::ProvisionResult> result =
      options.ok() ? fedsched::provision::Provision(*options)
                   : absl::StatusOr<fedsched::provision::ProvisionResult>(options.status());
  if (!result.ok()) {
    std::fprintf(stderr, "fedsched-provision: %s\n", result.status().ToString().c_str());
    return 2;
  }
  std::printf("wrote %s: the CA (ca/, keep its key offline), k8s/secrets.yaml and %zu kits:\n",
              result->out_dir.c_str(), result->kits.size());
  for (const std::string& kit : result->kits) std::printf("  %s/\n", kit.c_str());
  std::printf("see %s/README.txt\n", result->out_dir.c_str());
  return 0;
}

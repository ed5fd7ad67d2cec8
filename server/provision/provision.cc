#include "server/provision/provision.h"

#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/sdk/state_dir.h"
#include "common/config.h"
#include "common/private_file.h"
#include "common/status_macros.h"
#include "server/provision/k8s_secrets.h"
#include "server/provision/kit_configs.h"
#include "server/provision/output_tree.h"
#include "server/provision/pki.h"
#include "server/service/credentials.h"

namespace fedsched::provision {
namespace {

constexpr char kOperatorName[] = "fedsched-operator";

// An id that names a kit folder (and a file in the root's aggregator token folder).
absl::Status CheckKitName(const std::string& what, const std::string& name, bool with_cert) {
  if (absl::Status s = CheckIdentity(name); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "': ", s.message()));
  }
  if (name == "." || name == ".." || name.front() == '.') {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "' must not start with '.'"));
  }
  if (with_cert && name.size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", name, "' is the CN of its certificate: at most 64 characters"));
  }
  return absl::OkStatus();
}

// `options` checked, with defaults filled in.
absl::StatusOr<ProvisionOptions> Checked(ProvisionOptions o) {
  if (o.server_names.empty()) o.server_names = {"127.0.0.1", "localhost"};
  for (const std::string& n : o.server_names) FEDSCHED_RETURN_IF_ERROR(CheckAltName(n));
  if (o.server_names.front().size() > 64) {
    return absl::InvalidArgumentError(
        "the first server name is its certificate's CN: at most 64 "
        "characters");
  }
  if (o.port < 1 || o.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", o.port, " is outside [1, 65535]"));
  }
  if (!o.server_dir.empty() && o.server_dir.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("the server's folder '", o.server_dir, "' must be an absolute path"));
  }
  while (o.server_dir.size() > 1 && o.server_dir.back() == '/') o.server_dir.pop_back();
  if (o.devices.empty()) {
    return absl::InvalidArgumentError("no devices: give device identities or a device count");
  }
  if (o.ca_validity_days < o.validity_days) {
    return absl::InvalidArgumentError(absl::StrCat("the CA's validity (", o.ca_validity_days,
                                                   " days) is shorter than its certificates' (",
                                                   o.validity_days, ")"));
  }
  if (!o.aggregators.empty() && o.device_auth == DeviceAuth::kCertificate) {
    return absl::InvalidArgumentError(
        "certificate-only admission does not work through aggregators (the root never sees the "
        "devices' certificates): use certificate_and_key or enrolment_key");
  }
  const bool certs = DevicesHaveCertificates(o.device_auth);
  std::set<std::string> seen;
  for (const std::string& d : o.devices) {
    FEDSCHED_RETURN_IF_ERROR(CheckKitName("device", d, certs));
    if (!seen.insert(d).second)
      return absl::InvalidArgumentError(absl::StrCat("device '", d, "' is listed twice"));
  }
  std::set<std::string> ids;
  std::set<std::pair<std::string, int>> endpoints = {{o.server_names.front(), o.port}};
  for (size_t i = 0; i < o.aggregators.size(); ++i) {
    AggregatorSpec& a = o.aggregators[i];
    FEDSCHED_RETURN_IF_ERROR(CheckKitName("aggregator", a.id, /*with_cert=*/true));
    if (a.host.empty()) a.host = a.id;
    FEDSCHED_RETURN_IF_ERROR(CheckAltName(a.host));
    if (a.port == 0) a.port = o.port + 1 + static_cast<int>(i);
    if (a.port < 1 || a.port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregator '", a.id, "': port ", a.port, " is outside [1, 65535]"));
    }
    if (!ids.insert(a.id).second || !endpoints.insert({a.host, a.port}).second) {
      return absl::InvalidArgumentError(absl::StrCat("aggregator '", a.id,
                                                     "': its id or its address ",
                                                     AggregatorAddress(a), " is used twice"));
    }
  }
  return o;
}

std::string ConfigFile(const std::string& program, const google::protobuf::Message& config) {
  return absl::StrCat("# ", program,
                      " config made by fedsched-provision (docs/guides/PROVISIONING.md).\n"
                      "# Paths are relative to this folder: start it with ./start.sh.\n",
                      ConfigToText(config));
}

// The lines of a kit's script that resolve FEDSCHED_BIN (it may be relative to the caller's
// folder) and change into the kit's folder.
constexpr char kScriptPrologue[] =
    "set -euo pipefail\n"
    "bin=${FEDSCHED_BIN:+$(cd \"$FEDSCHED_BIN\" && pwd)/}\n"
    "cd \"$(dirname \"$0\")\"\n";

std::string StartScript(const std::string& program, const std::string& config) {
  return absl::StrCat("#!/usr/bin/env bash\n# Starts ", program,
                      " with this kit (made by fedsched-provision; docs/guides/PROVISIONING.md).\n"
                      "# Usage: ./start.sh [more flags]   FEDSCHED_BIN=DIR picks the binaries' "
                      "folder (default: PATH).\n",
                      kScriptPrologue, "exec \"${bin}", program, "\" --config=", config,
                      " \"$@\"\n");
}

// ca.crt, tls.crt and tls.key of `cert` under `kit`/tls (0700).
absl::Status WriteTls(OutputTree& tree, const std::string& kit, const KeyAndCertificate& ca,
                      const KeyAndCertificate* cert) {
  FEDSCHED_RETURN_IF_ERROR(tree.MakeDir(kit + "/tls", 0700));
  FEDSCHED_RETURN_IF_ERROR(
      tree.WriteFile(absl::StrCat(kit, "/", kCaFile), ca.certificate_pem, 0644));
  if (cert == nullptr) return absl::OkStatus();
  FEDSCHED_RETURN_IF_ERROR(
      tree.WriteFile(absl::StrCat(kit, "/", kCertFile), cert->certificate_pem, 0644));
  return tree.WriteFile(absl::StrCat(kit, "/", kKeyFile), cert->key_pem, 0600);
}

// The secrets shared between kits.
struct Secrets {
  KeyAndCertificate ca;
  KeyAndCertificate server;
  std::string enrolment_key;   // hex, empty when no key
  std::string operator_token;  // hex
  std::vector<std::string> aggregator_tokens;
};

// The secret in `reuse_dir`/`relative` when there is a reuse folder and the file exists, else
// a fresh random one.
absl::StatusOr<std::string> ReusedOrNewToken(const std::string& reuse_dir,
                                             const std::string& relative) {
  if (!reuse_dir.empty()) {
    const std::string path = absl::StrCat(reuse_dir, "/", relative);
    absl::StatusOr<std::string> kept = ReadSecretFile(path, 16);
    if (kept.ok() || !absl::IsNotFound(kept.status())) return kept;
  }
  return RandomHex(32);
}

// The CA and the tokens: new, or those of `o.reuse_dir` (the server's certificate is the
// caller's).
absl::StatusOr<Secrets> MakeSecrets(const ProvisionOptions& o) {
  Secrets s;
  if (o.reuse_dir.empty()) {
    FEDSCHED_ASSIGN_OR_RETURN(s.ca, MakeCa(o.ca_name, o.ca_validity_days));
  } else {
    FEDSCHED_ASSIGN_OR_RETURN(s.ca.certificate_pem,
                              ReadFileToString(absl::StrCat(o.reuse_dir, "/ca/ca.crt")));
    FEDSCHED_ASSIGN_OR_RETURN(s.ca.key_pem,
                              ReadPrivateFile(absl::StrCat(o.reuse_dir, "/ca/ca.key")));
  }
  const std::string server_kit = "server/";
  if (UsesEnrolmentKey(o.device_auth)) {
    FEDSCHED_ASSIGN_OR_RETURN(s.enrolment_key,
                              ReusedOrNewToken(o.reuse_dir, server_kit + kEnrolmentKeyFile));
  }
  FEDSCHED_ASSIGN_OR_RETURN(s.operator_token,
                            ReusedOrNewToken(o.reuse_dir, server_kit + kOperatorTokenFile));
  for (const AggregatorSpec& a : o.aggregators) {
    FEDSCHED_ASSIGN_OR_RETURN(
        s.aggregator_tokens.emplace_back(),
        ReusedOrNewToken(o.reuse_dir, absl::StrCat(server_kit, kAggregatorTokenDir, "/", a.id)));
  }
  return s;
}

absl::Status WriteServerKit(OutputTree& tree, const ProvisionOptions& o, const Secrets& s) {
  const std::string kit = "server";
  FEDSCHED_RETURN_IF_ERROR(tree.MakeDir(kit, 0700));
  FEDSCHED_RETURN_IF_ERROR(WriteTls(tree, kit, s.ca, &s.server));
  FEDSCHED_RETURN_IF_ERROR(tree.MakeDir(kit + "/secrets", 0700));
  if (!s.enrolment_key.empty()) {
    FEDSCHED_RETURN_IF_ERROR(
        tree.WriteFile(absl::StrCat(kit, "/", kEnrolmentKeyFile), s.enrolment_key + "\n", 0600));
  }
  FEDSCHED_RETURN_IF_ERROR(
      tree.WriteFile(absl::StrCat(kit, "/", kOperatorTokenFile), s.operator_token + "\n", 0600));
  if (!o.aggregators.empty()) {
    FEDSCHED_RETURN_IF_ERROR(tree.MakeDir(absl::StrCat(kit, "/", kAggregatorTokenDir), 0700));
    for (size_t i = 0; i < o.aggregators.size(); ++i) {
      FEDSCHED_RETURN_IF_ERROR(
          tree.WriteFile(absl::StrCat(kit, "/", kAggregatorTokenDir, "/", o.aggregators[i].id),
                         s.aggregator_tokens[i] + "\n", 0600));
    }
  }
  FEDSCHED_RETURN_IF_ERROR(tree.WriteFile(kit + "/server.textproto",
                                          ConfigFile("fedsched-server", ServerKitConfig(o)), 0644));
  return tree.WriteFile(kit + "/start.sh", StartScript("fedsched-server", "server.textproto"),
                        0755);
}

// The operator's files for fedsched-status and fedsched-ctl: the CA, the token and, when the
// server requires client certificates, a client certificate of its own.
absl::Status WriteOperatorKit(OutputTree& tree, const ProvisionOptions& o, const Secrets& s) {
  const std::string kit = "operator";
  FEDSCHED_RETURN_IF_ERROR(tree.MakeDir(kit, 0700));
  const bool mutual = ServerKitConfig(o).transport().require_client_cert();
  std::string tls_flags = absl::StrCat("--ca=", kCaFile);
  if (mutual) {
    LeafOptions leaf{kOperatorName, {}, Usage::kClient, o.validity_days};
    FEDSCHED_ASSIGN_OR_RETURN(KeyAndCertificate cert, IssueCertificate(s.ca, leaf));
    FEDSCHED_RETURN_IF_ERROR(WriteTls(tree, kit, s.ca, &cert));
    absl::StrAppend(&tls_flags, " --cert=", kCertFile, " --key=", kKeyFile);
  } else {
    FEDSCHED_RETURN_IF_ERROR(WriteTls(tree, kit, s.ca, nullptr));
  }
  FEDSCHED_RETURN_IF_ERROR(
      tree.WriteFile(absl::StrCat(kit, "/", kOperatorTokenFile), s.operator_token + "\n", 0600));
  const std::string script = absl::StrCat(
      "#!/usr/bin/env bash\n# Runs fedsched-status against the provisioned server with the "
      "operator's credentials\n# (made by fedsched-provision). Usage: ./status.sh [--rounds=N] "
      "[--clients]\n# FEDSCHED_BIN=DIR picks the binaries' folder (default: PATH).\n",
      kScriptPrologue, "exec \"${bin}fedsched-status\" --server=", ServerAddress(o), " ", tls_flags,
      " --token_file=", kOperatorTokenFile, " \"$@\"\n");
  return tree.WriteFile(kit + "/status.sh", script, 0755);
}

absl::Status WriteAggregatorKit(OutputTree& tree, const ProvisionOptions& o, const Secrets& s,
                                int index) {
  const AggregatorSpec& a = o.aggregators[index];
  const std::string kit = absl::StrCat("aggregators/", a.id);
  FEDSCHED_RETURN_IF_ERROR(tree.MakeDir(kit, 0700));
  std::vector<std::string> names = {a.host};
  if (a.id != a.host && CheckAltName(a.id).ok()) names.push_back(a.id);
  LeafOptions leaf{a.id, names, Usage::kServerClient, o.validity_days};
  FEDSCHED_ASSIGN_OR_RETURN(KeyAndCertificate cert, IssueCertificate(s.ca, leaf));
  FEDSCHED_RETURN_IF_ERROR(WriteTls(tree, kit, s.ca, &cert));
  FEDSCHED_RETURN_IF_ERROR(tree.MakeDir(kit + "/secrets", 0700));
  FEDSCHED_RETURN_IF_ERROR(tree.WriteFile(absl::StrCat(kit, "/", kUpstreamTokenFile),
                                          s.aggregator_tokens[index] + "\n", 0600));
  FEDSCHED_RETURN_IF_ERROR(tree.WriteFile(
      kit + "/aggregator.textproto",
      ConfigFile("fedsched-server (aggregator)", AggregatorKitConfig(o, index)), 0644));
  return tree.WriteFile(kit + "/start.sh", StartScript("fedsched-server", "aggregator.textproto"),
                        0755);
}

absl::Status WriteDeviceKit(OutputTree& tree, const ProvisionOptions& o, const Secrets& s,
                            int index) {
  const std::string& id = o.devices[index];
  const std::string kit = absl::StrCat("devices/", id);
  FEDSCHED_RETURN_IF_ERROR(tree.MakeDir(kit, 0700));
  if (DevicesHaveCertificates(o.device_auth)) {
    LeafOptions leaf{id, {}, Usage::kClient, o.validity_days};
    FEDSCHED_ASSIGN_OR_RETURN(KeyAndCertificate cert, IssueCertificate(s.ca, leaf));
    FEDSCHED_RETURN_IF_ERROR(WriteTls(tree, kit, s.ca, &cert));
  } else {
    FEDSCHED_RETURN_IF_ERROR(WriteTls(tree, kit, s.ca, nullptr));
  }
  // The state dir as the SDK keeps it (client/sdk/state_dir.h): private, with the identity and,
  // under an enrolment key, the device's secret (what fedsched-enroll --state_dir writes).
  const std::string state = absl::StrCat(kit, "/", kStateDir);
  FEDSCHED_RETURN_IF_ERROR(tree.MakeDir(state, 0700));
  FEDSCHED_RETURN_IF_ERROR(tree.WriteFile(state + "/identity", id + "\n", 0600));
  if (!s.enrolment_key.empty()) {
    FEDSCHED_RETURN_IF_ERROR(
        tree.WriteFile(state + "/credential", EnrolmentSecret(s.enrolment_key, id) + "\n", 0600));
  }
  FEDSCHED_RETURN_IF_ERROR(tree.WriteFile(
      kit + "/client.textproto", ConfigFile("fedsched-client", DeviceKitConfig(o, index)), 0644));
  return tree.WriteFile(kit + "/start.sh", StartScript("fedsched-client", "client.textproto"),
                        0755);
}

std::string Readme(const ProvisionOptions& o, const std::vector<std::string>& kits) {
  std::string out = absl::StrCat(
      kOutputMarker, " (docs/guides/PROVISIONING.md)\n\n", "Server: ", ServerAddress(o),
      " (certificate names: ", absl::StrJoin(o.server_names, ", "), ")\n", "Device admission: ",
      o.device_auth == DeviceAuth::kCertificateAndKey ? "client certificate and enrolment secret"
      : o.device_auth == DeviceAuth::kEnrolmentKey    ? "enrolment secret (TLS to the server)"
                                                      : "client certificate (mutual TLS)",
      "\n\n",
      "ca/            the CA's certificate and PRIVATE KEY: keep it offline; never deploy it\n",
      "k8s/           secrets.yaml: the Secrets deploy/k8s mounts (private)\n");
  for (const std::string& kit : kits) {
    absl::StrAppend(&out, kit, "/", std::string(kit.size() < 14 ? 14 - kit.size() : 1, ' '),
                    kit == "server"     ? "the server's kit: ./start.sh\n"
                    : kit == "operator" ? "fedsched-status with the operator's credentials: "
                                          "./status.sh\n"
                                        : "a kit: ./start.sh\n");
  }
  absl::StrAppend(&out,
                  "\nCopy each kit whole to its host, keeping modes (tar, cp -a, scp -rp), owned "
                  "by the account that runs it.\n");
  return out;
}

}  // namespace

absl::StatusOr<DeviceAuth> ParseDeviceAuth(absl::string_view name) {
  if (name == "certificate_and_key") return DeviceAuth::kCertificateAndKey;
  if (name == "enrolment_key") return DeviceAuth::kEnrolmentKey;
  if (name == "certificate") return DeviceAuth::kCertificate;
  return absl::InvalidArgumentError(
      absl::StrCat("device admission '", name,
                   "' is not one of certificate_and_key, enrolment_key, certificate"));
}

absl::StatusOr<AggregatorSpec> ParseAggregatorSpec(absl::string_view entry) {
  AggregatorSpec spec;
  const size_t eq = entry.find('=');
  spec.id = std::string(entry.substr(0, eq));
  if (eq != absl::string_view::npos) {
    absl::string_view address = entry.substr(eq + 1);
    const size_t colon = address.rfind(':');
    spec.host = std::string(address.substr(0, colon));
    if (colon != absl::string_view::npos &&
        (!absl::SimpleAtoi(address.substr(colon + 1), &spec.port) || spec.port < 1 ||
         spec.port > 65535)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "aggregator '", entry, "': the port after ':' must be a number in [1, 65535]"));
    }
  }
  if (spec.id.empty() || (eq != absl::string_view::npos && spec.host.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregator '", entry, "' is not of the form ID[=HOST[:PORT]]"));
  }
  return spec;
}

absl::StatusOr<ProvisionResult> Provision(const ProvisionOptions& options) {
  FEDSCHED_ASSIGN_OR_RETURN(const ProvisionOptions o, Checked(options));
  FEDSCHED_ASSIGN_OR_RETURN(std::unique_ptr<OutputTree> tree,
                            OutputTree::Begin(o.out_dir, o.force));
  FEDSCHED_ASSIGN_OR_RETURN(Secrets s, MakeSecrets(o));
  LeafOptions server_leaf{o.server_names.front(), o.server_names, Usage::kServer, o.validity_days};
  FEDSCHED_ASSIGN_OR_RETURN(s.server, IssueCertificate(s.ca, server_leaf));
  FEDSCHED_RETURN_IF_ERROR(tree->MakeDir("ca", 0700));
  FEDSCHED_RETURN_IF_ERROR(tree->WriteFile("ca/ca.crt", s.ca.certificate_pem, 0644));
  FEDSCHED_RETURN_IF_ERROR(tree->WriteFile("ca/ca.key", s.ca.key_pem, 0600));
  ProvisionResult result;
  result.out_dir = o.out_dir;
  FEDSCHED_RETURN_IF_ERROR(WriteServerKit(*tree, o, s));
  result.kits.push_back("server");
  FEDSCHED_RETURN_IF_ERROR(WriteOperatorKit(*tree, o, s));
  result.kits.push_back("operator");
  for (size_t i = 0; i < o.aggregators.size(); ++i) {
    FEDSCHED_RETURN_IF_ERROR(WriteAggregatorKit(*tree, o, s, static_cast<int>(i)));
    result.kits.push_back(absl::StrCat("aggregators/", o.aggregators[i].id));
  }
  for (size_t i = 0; i < o.devices.size(); ++i) {
    FEDSCHED_RETURN_IF_ERROR(WriteDeviceKit(*tree, o, s, static_cast<int>(i)));
    result.kits.push_back(absl::StrCat("devices/", o.devices[i]));
  }
  ServerSecrets k8s{s.ca.certificate_pem, s.server.certificate_pem, s.server.key_pem,
                    s.enrolment_key.empty() ? "" : s.enrolment_key + "\n", s.operator_token + "\n"};
  FEDSCHED_RETURN_IF_ERROR(tree->MakeDir("k8s", 0700));
  FEDSCHED_RETURN_IF_ERROR(
      tree->WriteFile("k8s/secrets.yaml", ServerSecretManifests(k8s, o.k8s_namespace), 0600));
  FEDSCHED_RETURN_IF_ERROR(tree->WriteFile("README.txt", Readme(o, result.kits), 0644));
  FEDSCHED_RETURN_IF_ERROR(tree->Commit());
  return result;
}

}  // namespace fedsched::provision

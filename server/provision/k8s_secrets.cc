#include "server/provision/k8s_secrets.h"

#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace fedsched::provision {
namespace {

std::string Secret(const std::string& name, const std::string& k8s_namespace,
                   const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string out = absl::StrCat("apiVersion: v1\nkind: Secret\nmetadata:\n  name: ", name, "\n");
  if (!k8s_namespace.empty()) absl::StrAppend(&out, "  namespace: ", k8s_namespace, "\n");
  absl::StrAppend(&out, "  labels: {app.kubernetes.io/name: fedsched-server}\ntype: Opaque\n",
                  "data:\n");
  for (const auto& [key, value] : entries) {
    absl::StrAppend(&out, "  ", key, ": ", absl::Base64Escape(value), "\n");
  }
  return out;
}

}  // namespace

std::string ServerSecretManifests(const ServerSecrets& secrets, const std::string& k8s_namespace) {
  std::string out =
      "# The Secrets deploy/k8s/statefulset.yaml mounts (made by fedsched-provision; they hold\n"
      "# private keys: keep this file private). kubectl apply -f secrets.yaml\n";
  absl::StrAppend(&out, Secret("fedsched-tls", k8s_namespace,
                               {{"tls.crt", secrets.certificate},
                                {"tls.key", secrets.private_key},
                                {"ca.crt", secrets.ca_certificate}}));
  if (!secrets.enrolment_key.empty()) {
    absl::StrAppend(&out, "---\n",
                    Secret("fedsched-enrolment", k8s_namespace, {{"key", secrets.enrolment_key}}));
  }
  absl::StrAppend(&out, "---\n",
                  Secret("fedsched-operator", k8s_namespace, {{"token", secrets.operator_token}}));
  return out;
}

}  // namespace fedsched::provision

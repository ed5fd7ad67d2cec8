// Kubernetes Secret manifests for the server of deploy/k8s (statefulset.yaml mounts them and its
// init container copies the private files into a memory volume; docs/guides/PROVISIONING.md).
#ifndef FEDSCHED_SERVER_PROVISION_K8S_SECRETS_H_
#define FEDSCHED_SERVER_PROVISION_K8S_SECRETS_H_

#include <string>

namespace fedsched::provision {

// What the server's Secrets hold (PEM text and token lines as written in the server's kit).
struct ServerSecrets {
  std::string ca_certificate;  // fedsched-tls, key ca.crt
  std::string certificate;     // fedsched-tls, key tls.crt
  std::string private_key;     // fedsched-tls, key tls.key
  std::string enrolment_key;   // fedsched-enrolment, key `key`; empty = no such Secret
  std::string operator_token;  // fedsched-operator, key `token`
};

// A multi-document YAML of Opaque Secrets fedsched-tls, fedsched-enrolment (when an enrolment
// key is given) and fedsched-operator, values base64-encoded under `data`, labelled
// app.kubernetes.io/name: fedsched-server, in `k8s_namespace` when not empty. `kubectl apply -f`
// takes it as it is.
std::string ServerSecretManifests(const ServerSecrets& secrets, const std::string& k8s_namespace);

}  // namespace fedsched::provision

#endif  // FEDSCHED_SERVER_PROVISION_K8S_SECRETS_H_

// Certificates for tests of TLS and mutual TLS on loopback, made by the openssl CLI.
#ifndef FEDSCHED_COMMON_TESTING_TEST_CERTIFICATES_H_
#define FEDSCHED_COMMON_TESTING_TEST_CERTIFICATES_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/temp_dir.h"
#include "gtest/gtest.h"

namespace fedsched::testing {

// A CA, a server certificate for 127.0.0.1, two client certificates from the CA and one from a
// rogue CA, made with the openssl CLI once for the whole test binary (register it with
// ::testing::AddGlobalTestEnvironment in the test's main). Files: ca.pem, server.pem/.key,
// client_a.pem/.key, client_b.pem/.key, rogue_client.pem/.key (client certificates' CN: their
// name).
class TestCertificates : public ::testing::Environment {
 public:
  static std::filesystem::path dir() { return dir_; }
  static std::string Path(const std::string& name) { return (dir_ / name).string(); }

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("fedsched_tls_", ::getpid());
    std::filesystem::create_directories(dir_);
    const std::string d = dir_.string();
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::string script = absl::StrCat(
        "set -e; cd '", d, "'\n",
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n'"
        " > server.ext\n",
        "printf 'extendedKeyUsage=clientAuth\\n' > client.ext\n");
    for (const char* ca : {"ca", "rogue_ca"}) {
      absl::StrAppend(&script, "openssl req -x509 ", key, " -keyout ", ca, ".key -out ", ca,
                      ".pem -days 2 -subj '/CN=fedsched test ", ca, "'\n");
    }
    auto leaf = [&](const std::string& name, const std::string& ca, const std::string& ext) {
      absl::StrAppend(&script, "openssl req ", key, " -keyout ", name, ".key -out ", name,
                      ".csr -subj '/CN=", name, "'\n", "openssl x509 -req -in ", name, ".csr -CA ",
                      ca, ".pem -CAkey ", ca, ".key -CAcreateserial -days 2 -out ", name,
                      ".pem -extfile ", ext, "\n");
    };
    leaf("server", "ca", "server.ext");
    leaf("client_a", "ca", "client.ext");
    leaf("client_b", "ca", "client.ext");
    leaf("rogue_client", "rogue_ca", "client.ext");
    const std::string script_path = WriteWithMode((dir_ / "make_certs.sh").string(), script, 0600);
    ASSERT_EQ(
        std::system(absl::StrCat("bash '", script_path, "' > '", d, "/openssl.log' 2>&1").c_str()),
        0)
        << "openssl failed; see " << d << "/openssl.log";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

 private:
  static inline std::filesystem::path dir_;
};

}  // namespace fedsched::testing

#endif  // FEDSCHED_COMMON_TESTING_TEST_CERTIFICATES_H_

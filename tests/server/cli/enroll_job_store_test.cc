// fedsched-enroll on a store with job namespaces: it opens (RocksDB needs every column family
// named), revokes in the default namespace (shared by every job), and a re-enrolment clears the
// identity's binding in every job's copy of its profile, leaving the jobs' rounds alone.
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "server/store/store.h"
#include "tests/server/cli/run_tool.h"

namespace fedsched {
namespace {

using ::testing::HasSubstr;

// Runs fedsched-enroll on `store_path` with `args`.
fedsched::testing::ToolOutcome Enroll(const std::filesystem::path& store_path,
                                      const std::string& args) {
  return fedsched::testing::RunTool("fedsched-enroll",
                                    "--store_path=" + store_path.string() + " " + args);
}

v1::ClientProfile BoundProfile() {
  v1::ClientProfile profile;
  profile.set_client_id("c-1");
  profile.set_identity("dev-1");
  profile.set_cert_fingerprint("fingerprint");
  profile.set_signing_public_key("key");
  return profile;
}

class EnrollJobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fedsched::testing::FreshTestDir("fedsched_enroll_job_store_test");
    store_path_ = dir_ / "store";
    std::filesystem::create_directories(store_path_);
    ASSERT_EQ(::chmod(store_path_.c_str(), 0700), 0);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open({.path = store_path_.string()}));
    ASSERT_OK(store->PutProfile(BoundProfile()));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, store->OpenNamespace("a"));
    v1::Model model;
    model.add_tensors()->set_name("w");
    ASSERT_OK(a->Initialize(model, {}));
    ASSERT_OK(a->PutProfile(BoundProfile()));
    ASSERT_OK(store->OpenNamespace("b").status());  // a job without the device
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
  std::filesystem::path store_path_;
};

TEST_F(EnrollJobStoreTest, RevokeAndResetWorkOnAStoreWithJobNamespaces) {
  const fedsched::testing::ToolOutcome revoked = Enroll(store_path_, "--revoke_identity=dev-1");
  ASSERT_EQ(revoked.exit_code, 0) << revoked.output;
  EXPECT_THAT(revoked.output, HasSubstr("is revoked"));
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open({.path = store_path_.string()}));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, store->OpenNamespace("a"));
    ASSERT_OK_AND_ASSIGN(std::vector<Revocation> seen_by_a, a->LoadRevocations());
    ASSERT_EQ(seen_by_a.size(), 1u);
    EXPECT_EQ(seen_by_a[0].identity, "dev-1");
  }
  const fedsched::testing::ToolOutcome reset = Enroll(store_path_, "--reset_identity=dev-1");
  ASSERT_EQ(reset.exit_code, 0) << reset.output;
  EXPECT_THAT(reset.output, HasSubstr("is no longer revoked"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open({.path = store_path_.string()}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, store->OpenNamespace("a"));
  for (Store* view : {store.get(), a.get()}) {
    ASSERT_OK_AND_ASSIGN(std::vector<v1::ClientProfile> profiles, view->LoadProfiles());
    ASSERT_EQ(profiles.size(), 1u);
    EXPECT_TRUE(profiles[0].cert_fingerprint().empty());
    EXPECT_TRUE(profiles[0].signing_public_key().empty());
  }
  ASSERT_OK_AND_ASSIGN(std::vector<Revocation> left, store->LoadRevocations());
  EXPECT_TRUE(left.empty());
  ASSERT_OK_AND_ASSIGN(v1::RunMeta meta, a->LoadMeta());
  EXPECT_EQ(meta.committed_round(), 0);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> namespaces, store->ListNamespaces());
  EXPECT_EQ(namespaces, (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace fedsched

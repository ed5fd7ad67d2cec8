// The server's files and its ends, against the real binaries on 127.0.0.1
// (docs/guides/OPERATIONS.md "Files the server trusts", "A full disk", "Re-enrolling a device",
// "Revoking a device"):
//   - a store of another uid, or reached through a symbolic link, is refused at start;
//   - a start on a full disk, and a disk that fills while the server runs, end with exit 1 and
//     a message naming the store and the space needed, never an abort (a small tmpfs; skipped
//     with a message where mounting is not allowed);
//   - a device whose credential file is emptied exits non-zero naming the file and the
//     operator's recovery, and that recovery (fedsched-enroll --reset_identity on the stopped
//     server's store) lets it register again;
//   - a revoked device (fedsched-enroll --revoke_identity) is refused across restarts, stops
//     saying so, and --reset_identity lets it back; --reset_identity also lifts a
//     secure-aggregation exclusion.
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "server/store/store.h"
#include "tests/integration/process.h"

namespace fedsched {
namespace {

using ::fedsched::testing::BinaryDir;
using ::fedsched::testing::Process;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uid_t kOtherUid = 65534;  // "nobody": another local user

class LocalTrustTest : public ::fedsched::testing::TempDirTest {
 protected:
  void TearDown() override {
    if (!mounted_.empty()) ::umount2(mounted_.c_str(), MNT_DETACH);
    TempDirTest::TearDown();
  }

  // Mounts a tmpfs of `size` (e.g. "4m") at Path("disk"); false (the caller skips) when this
  // process may not mount.
  bool MountSmallDisk(const std::string& size) {
    std::filesystem::create_directories(Path("disk"));
    if (::mount("tmpfs", Path("disk").c_str(), "tmpfs", 0, ("size=" + size).c_str()) != 0) {
      skip_reason_ = absl::StrCat("cannot mount a tmpfs: ", std::strerror(errno));
      return false;
    }
    mounted_ = Path("disk");
    return true;
  }

  // Starts fedsched-server with `config_text` (plus port 0 and no evaluation) on `store`.
  std::unique_ptr<Process> StartServer(const std::string& config_text, const std::string& store,
                                       const std::string& log,
                                       std::vector<std::string> flags = {}) {
    const std::string config = absl::StrCat(
        config_text, "\nlisten_address: \"127.0.0.1:0\"\nmodel { architecture: \"mlp\" }\n",
        "eval { test_images_path: \"/nonexistent\" test_labels_path: \"/nonexistent\" }\n");
    EXPECT_OK(WriteFileAtomically(Path("server.textproto"), config));
    std::vector<std::string> argv = {BinaryDir() + "/server/fedsched-server",
                                     "--config=" + Path("server.textproto"),
                                     "--store_path=" + store};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return Process::Spawn(argv, Path(log));
  }

  std::string AddressOf(Process& server) { return ::fedsched::testing::ListeningAddress(server); }

  // Runs a tool to its end; returns its exit code (or -1 after 60 s) and fills `log`.
  int RunTool(const std::vector<std::string>& argv, const std::string& log_name, std::string* log) {
    std::unique_ptr<Process> tool = Process::Spawn(argv, Path(log_name));
    if (tool == nullptr) return -1;
    std::optional<int> code = tool->Wait(absl::Seconds(60));
    *log = tool->Log();
    return code.value_or(-1);
  }

  // The offline tool `argv` is refused while `server` holds the store (exit 2, "in use"); then
  // `server` is stopped cleanly, so the store is free for the tool.
  void ExpectInUseThenStop(const std::vector<std::string>& argv, Process& server) {
    std::string out;
    EXPECT_EQ(RunTool(argv, "busy.log", &out), 2) << out;
    EXPECT_THAT(out, HasSubstr("in use"));
    server.Signal(SIGTERM);
    ASSERT_EQ(server.Wait(absl::Seconds(60)), std::optional<int>(0)) << server.Log();
  }

  std::string mounted_;
  std::string skip_reason_;
};

constexpr char kIdleServer[] =
    "clients_per_round: 2\nmin_updates: 2\nmin_online_clients: 2\nnum_rounds: 3\n"
    "heartbeat_interval_ms: 500\nmissed_heartbeats: 20\n";
// The same, admitting devices on first use: the re-enrolment by --reset_identity is for
// credentials issued at first use (a provisioned device gets its secret again from the key).
constexpr char kIdleFirstUseServer[] =
    "clients_per_round: 2\nmin_updates: 2\nmin_online_clients: 2\nnum_rounds: 3\n"
    "heartbeat_interval_ms: 500\nmissed_heartbeats: 20\n"
    "security { allow_trust_on_first_use: true }\n";

// The finding: a store directory pre-created by another local user (with an operator token they
// chose) was accepted and merely chmodded; now the server refuses it before opening anything.
TEST_F(LocalTrustTest, AStoreOfAnotherUidOrBehindASymlinkIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown the store to uid " << kOtherUid;
  const std::string theirs = Path("theirs");
  ASSERT_EQ(::mkdir(theirs.c_str(), 0700), 0);
  ASSERT_OK(WriteFileAtomically(theirs + "/operator_token", "0123456789abcdef0123456789abcdef\n"));
  ASSERT_EQ(::chown((theirs + "/operator_token").c_str(), kOtherUid, kOtherUid), 0);
  ASSERT_EQ(::chown(theirs.c_str(), kOtherUid, kOtherUid), 0);
  std::unique_ptr<Process> server = StartServer(kIdleServer, theirs, "theirs.log");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->Wait(absl::Seconds(60)), std::optional<int>(2)) << server->Log();
  EXPECT_THAT(server->Log(), AllOf(HasSubstr(theirs), HasSubstr("owned by uid 65534")));

  // A link to a directory of our own is refused as well: whoever controls the link controls
  // which store is used.
  ASSERT_EQ(::mkdir(Path("real").c_str(), 0700), 0);
  std::filesystem::create_directory_symlink(Path("real"), Path("linked"));
  server = StartServer(kIdleServer, Path("linked"), "linked.log");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->Wait(absl::Seconds(60)), std::optional<int>(2)) << server->Log();
  EXPECT_THAT(server->Log(), AllOf(HasSubstr(Path("linked")), HasSubstr("symbolic link")));
  EXPECT_FALSE(std::filesystem::exists(Path("real") + "/CURRENT"));
}

// The finding: on a full disk the server aborted within a second without naming the disk.
TEST_F(LocalTrustTest, AStartOnAFullDiskSaysSoAndDoesNotAbort) {
  if (!MountSmallDisk("2m")) GTEST_SKIP() << skip_reason_;
  const std::string store = Path("disk") + "/store";
  std::unique_ptr<Process> server = StartServer(kIdleServer, store, "server.log");
  ASSERT_NE(server, nullptr);
  std::optional<int> code = server->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.has_value()) << server->Log();
  EXPECT_EQ(*code, 1) << server->Log();
  EXPECT_THAT(server->Log(), AllOf(HasSubstr(store), HasSubstr("are needed"), HasSubstr("MiB free"),
                                   HasSubstr("cannot start")));
}

// The finding: "No space left on device", then a RocksDB assertion (SIGABRT, exit 134). Now a
// disk that fills while the server runs stops it with exit 1 and a message naming the store.
TEST_F(LocalTrustTest, ADiskThatFillsStopsTheServerCleanly) {
  if (!MountSmallDisk("24m")) GTEST_SKIP() << skip_reason_;
  const std::string store = Path("disk") + "/store";
  std::unique_ptr<Process> server =
      StartServer(kIdleServer, store, "server.log", {"--min_free_disk_mb=4"});
  ASSERT_NE(server, nullptr);
  AddressOf(*server);
  // Fill the disk to the last byte.
  {
    std::ofstream filler(Path("disk") + "/filler", std::ios::binary);
    const std::string block(1 << 16, 'x');
    while (filler.write(block.data(), block.size())) {
    }
  }
  std::optional<int> code = server->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.has_value()) << "still running on a full disk\n" << server->Log();
  EXPECT_EQ(*code, 1) << server->Log();
  EXPECT_THAT(server->Log(),
              AllOf(HasSubstr(store), HasSubstr("are needed"), Not(HasSubstr("Assertion"))));
  // Space freed: the same store opens again (the server refuses only for want of space).
  std::filesystem::remove(Path("disk") + "/filler");
  server = StartServer(kIdleServer, store, "again.log", {"--min_free_disk_mb=4"});
  ASSERT_NE(server, nullptr);
  AddressOf(*server);
  server->Signal(SIGTERM);
  EXPECT_EQ(server->Wait(absl::Seconds(60)), std::optional<int>(0)) << server->Log();
}

// The finding: a device whose credential file was emptied retried "enrolled with another
// A lost enrolment key must not be replaced silently: a new one would refuse every device
// provisioned with the old one. The server refuses to start and says what to do.
TEST_F(LocalTrustTest, AMissingEnrolmentKeyOfAKnownFleetIsNotReplaced) {
  const std::string store = Path("store");
  std::unique_ptr<Process> server = StartServer(kIdleServer, store, "server-1.log");
  ASSERT_NE(server, nullptr);
  const std::string address = AddressOf(*server);
  std::string out;
  ASSERT_EQ(RunTool({BinaryDir() + "/server/fedsched-enroll", "--key_file=" + store +
                     "/enrolment_key", "--state_dir=" + Path("device")},
                    "enroll.log", &out),
            0)
      << out;
  std::unique_ptr<Process> client = Process::Spawn(
      {BinaryDir() + "/client/fedsched-client", "--partition_index=0", "--num_partitions=2",
       "--server=" + address, "--state_dir=" + Path("device"), "--log_level=info"},
      Path("client.log"));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->WaitForLog("registered as")) << client->Log();
  client->Signal(SIGKILL);
  client->Wait(absl::Seconds(10));
  server->Signal(SIGTERM);
  ASSERT_EQ(server->Wait(absl::Seconds(60)), std::optional<int>(0)) << server->Log();

  std::filesystem::remove(store + "/enrolment_key");
  server = StartServer(kIdleServer, store, "server-2.log");
  ASSERT_NE(server, nullptr);
  std::optional<int> code = server->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.has_value()) << server->Log();
  EXPECT_NE(*code, 0);
  EXPECT_THAT(server->Log(), AllOf(HasSubstr("enrolment_key is missing"),
                                   HasSubstr("restore the key"), HasSubstr("--create_key")));
  EXPECT_FALSE(std::filesystem::exists(store + "/enrolment_key"));
}

// credential" for ever, naming neither the file nor a way out, and no procedure existed.
TEST_F(LocalTrustTest, AnEmptiedCredentialExitsNamingTheFileAndReEnrolmentRecovers) {
  const std::string store = Path("store");
  std::unique_ptr<Process> server = StartServer(kIdleFirstUseServer, store, "server-1.log");
  ASSERT_NE(server, nullptr);
  const std::string address = AddressOf(*server);
  const std::string state = Path("device");
  const std::string credential = state + "/credential";
  auto start_client = [&](const std::string& log) {
    return Process::Spawn(
        {BinaryDir() + "/client/fedsched-client", "--partition_index=0", "--num_partitions=2",
         "--server=" + address, "--identity=dev-r", "--state_dir=" + state, "--log_level=info"},
        Path(log));
  };
  std::unique_ptr<Process> client = start_client("client-1.log");
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->WaitForLog("registered as")) << client->Log();
  client->Signal(SIGKILL);
  client->Wait(absl::Seconds(10));
  ASSERT_GT(std::filesystem::file_size(credential), 0u);

  std::filesystem::resize_file(credential, 0);
  client = start_client("client-2.log");
  ASSERT_NE(client, nullptr);
  std::optional<int> code = client->Wait(absl::Seconds(120));
  ASSERT_TRUE(code.has_value()) << "the client retries a refused credential\n" << client->Log();
  EXPECT_NE(*code, 0);
  EXPECT_THAT(client->Log(),
              AllOf(HasSubstr(credential), HasSubstr("is empty"),
                    HasSubstr("--reset_identity=dev-r"), HasSubstr("Retrying cannot help")));

  // Recovery: refused while the server holds the store; done once it is stopped.
  const std::string enroll = BinaryDir() + "/server/fedsched-enroll";
  ASSERT_NO_FATAL_FAILURE(
      ExpectInUseThenStop({enroll, "--store_path=" + store, "--reset_identity=dev-r"}, *server));
  std::string out;
  EXPECT_EQ(RunTool({enroll, "--store_path=" + store, "--reset_identity=nobody-here"},
                    "unknown.log", &out),
            1)
      << out;
  ASSERT_EQ(RunTool({enroll, "--store_path=" + store, "--reset_identity=dev-r"}, "reset.log", &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("no longer bound"));

  server = StartServer(kIdleFirstUseServer, store, "server-2.log");
  ASSERT_NE(server, nullptr);
  const std::string again = AddressOf(*server);
  client = Process::Spawn(
      {BinaryDir() + "/client/fedsched-client", "--partition_index=0", "--num_partitions=2",
       "--server=" + again, "--identity=dev-r", "--state_dir=" + state, "--log_level=info"},
      Path("client-3.log"));
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(client->WaitForLog("registered as")) << client->Log();
  EXPECT_TRUE(::fedsched::testing::TestServer::WaitFor(
      [&] { return std::filesystem::file_size(credential) > 0; }));
}

// Revoking a device (docs/guides/OPERATIONS.md "Revoking a device"): fedsched-enroll
// --revoke_identity is refused while the server runs; on the stopped server it revokes a known and
// a never-seen identity. After restarts the server refuses both whatever they present, the device
// stops with a message saying so, and --reset_identity lets it register again.
TEST_F(LocalTrustTest, ARevokedDeviceIsRefusedAcrossRestartsUntilReset) {
  const std::string store = Path("store");
  const std::string enroll = BinaryDir() + "/server/fedsched-enroll";
  std::unique_ptr<Process> server = StartServer(kIdleFirstUseServer, store, "server-1.log");
  ASSERT_NE(server, nullptr);
  auto start_client = [&](Process& at, const std::string& identity, const std::string& log) {
    return Process::Spawn(
        {BinaryDir() + "/client/fedsched-client", "--partition_index=0", "--num_partitions=2",
         "--server=" + AddressOf(at), "--identity=" + identity, "--state_dir=" + Path(identity),
         "--log_level=info"},
        Path(log));
  };
  std::unique_ptr<Process> client = start_client(*server, "dev-v", "client-1.log");
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->WaitForLog("registered as")) << client->Log();
  client->Signal(SIGKILL);
  client->Wait(absl::Seconds(10));

  ASSERT_NO_FATAL_FAILURE(
      ExpectInUseThenStop({enroll, "--store_path=" + store, "--revoke_identity=dev-v"}, *server));
  std::string out;
  ASSERT_EQ(RunTool({enroll, "--store_path=" + store, "--revoke_identity=dev-v"}, "rv.log", &out),
            0)
      << out;
  EXPECT_THAT(out, AllOf(HasSubstr("'dev-v' (c"), HasSubstr("is revoked"),
                         HasSubstr("--reset_identity=dev-v")));
  ASSERT_EQ(RunTool({enroll, "--store_path=" + store, "--revoke_identity=dev-new"}, "rn.log", &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("'dev-new' (not yet seen by this server) is revoked"));
  ASSERT_EQ(RunTool({enroll, "--store_path=" + store, "--revoke_identity=dev-new"}, "r2.log", &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("was already revoked"));

  // Two restarts: each time both devices stop, saying they were revoked.
  for (int start = 2; start <= 3; ++start) {
    server = StartServer(kIdleFirstUseServer, store, absl::StrCat("server-", start, ".log"));
    ASSERT_NE(server, nullptr);
    for (const std::string identity : {"dev-v", "dev-new"}) {
      client = start_client(*server, identity, absl::StrCat(identity, "-", start, ".log"));
      ASSERT_NE(client, nullptr);
      std::optional<int> code = client->Wait(absl::Seconds(120));
      ASSERT_TRUE(code.has_value()) << "a revoked client retries\n" << client->Log();
      EXPECT_NE(*code, 0);
      EXPECT_THAT(client->Log(),
                  AllOf(HasSubstr("operator revoked this device"),
                        HasSubstr("'" + identity + "' was revoked by the operator"),
                        HasSubstr("--reset_identity=" + identity), Not(HasSubstr("--key_file"))));
    }
    EXPECT_THAT(server->Log(), HasSubstr("2 identities are revoked"));
    server->Signal(SIGTERM);
    ASSERT_EQ(server->Wait(absl::Seconds(60)), std::optional<int>(0)) << server->Log();
  }

  // The way back: --reset_identity lifts the revocation of either.
  ASSERT_EQ(RunTool({enroll, "--store_path=" + store, "--reset_identity=dev-v"}, "s1.log", &out), 0)
      << out;
  EXPECT_THAT(out, HasSubstr("is no longer revoked"));
  ASSERT_EQ(RunTool({enroll, "--store_path=" + store, "--reset_identity=dev-new"}, "s2.log", &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("'dev-new' (not yet seen by this server) is no longer revoked"));
  server = StartServer(kIdleFirstUseServer, store, "server-4.log");
  ASSERT_NE(server, nullptr);
  for (const std::string identity : {"dev-v", "dev-new"}) {
    client = start_client(*server, identity, identity + "-4.log");
    ASSERT_NE(client, nullptr);
    EXPECT_TRUE(client->WaitForLog("registered as")) << client->Log();
  }
  EXPECT_THAT(server->Log(), Not(HasSubstr("identities are revoked")));
}

// --reset_identity is also the way back from a (false) secure-aggregation exclusion: it clears
// ClientProfile.secagg_excluded with the binding, and keeps the rest of the profile.
TEST_F(LocalTrustTest, ResetLiftsASecureAggregationExclusion) {
  const std::string store_path = Path("store");
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open({.path = store_path}));
    v1::ClientProfile profile;
    profile.set_client_id("c-x");
    profile.set_identity("dev-x");
    profile.set_successes(7);
    profile.set_cert_fingerprint("cred:bound");
    profile.set_secagg_excluded("round 3: its key shares to 2 neighbour(s) did not authenticate");
    profile.set_secagg_excluded_unix_ms(1'700'000'000'000);
    ASSERT_OK(store->PutProfile(profile));
  }
  std::filesystem::permissions(store_path, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace);
  std::string out;
  ASSERT_EQ(RunTool({BinaryDir() + "/server/fedsched-enroll", "--store_path=" + store_path,
                     "--reset_identity=dev-x"},
                    "reset.log", &out),
            0)
      << out;
  EXPECT_THAT(out, AllOf(HasSubstr("'dev-x' (c-x) is no longer bound"),
                         HasSubstr("may join secure-aggregation cohorts again"),
                         Not(HasSubstr("revoked"))));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open({.path = store_path}));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::ClientProfile> profiles, store->LoadProfiles());
  ASSERT_EQ(profiles.size(), 1u);
  EXPECT_EQ(profiles[0].secagg_excluded(), "");
  EXPECT_EQ(profiles[0].secagg_excluded_unix_ms(), 0);
  EXPECT_EQ(profiles[0].cert_fingerprint(), "");
  EXPECT_EQ(profiles[0].successes(), 7);
}

}  // namespace
}  // namespace fedsched

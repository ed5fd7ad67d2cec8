// The real fedsched-server (and fedsched-client) binaries as processes on 127.0.0.1: SIGTERM
// with an upload stuck mid-read, a round that closes at its deadline with no messages at all,
// a client SIGKILLed mid-round, broken config files, and a private store whose status needs the
// operator token.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "tests/integration/process.h"
#include "tests/server/service/grpc_test_harness.h"

namespace fedsched {
namespace {

using ::fedsched::testing::BinaryDir;
using ::fedsched::testing::DownloadRaw;
using ::fedsched::testing::FilledLike;
using ::fedsched::testing::PollRaw;
using ::fedsched::testing::Process;
using ::fedsched::testing::RegisterRaw;
using ::fedsched::testing::Session;
using ::fedsched::testing::TestServer;
using ::fedsched::testing::UploadMessages;
using ::fedsched::testing::UploadRaw;
using ::testing::HasSubstr;

class ServerProcessTest : public ::fedsched::testing::TempDirTest {
 protected:
  std::string store() const { return Path("store"); }

  // Writes `config_text` (plus port 0, the model architecture, no evaluation) and starts
  // fedsched-server. fedsched-client trains the default "mlp"; raw-stub tests use "softmax".
  // With `provision`, the store's enrolment key is testing::kTestEnrolmentKey (written before
  // the start, as scripts/lib/provision.sh does), so RegisterRaw's devices are provisioned.
  std::unique_ptr<Process> StartServer(const std::string& config_text,
                                       const std::string& log = "server.log",
                                       const std::string& architecture = "softmax",
                                       bool provision = true) {
    if (provision) {
      std::filesystem::create_directories(store());
      std::filesystem::permissions(store(), std::filesystem::perms::owner_all);
      EXPECT_OK(WriteFileAtomically(store() + "/enrolment_key", testing::kTestEnrolmentKey));
      std::filesystem::permissions(
          store() + "/enrolment_key",
          std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    }
    const std::string config = absl::StrCat(
        config_text, "\nlisten_address: \"127.0.0.1:0\"\nmodel { architecture: \"", architecture,
        "\" }\n",
        "eval { test_images_path: \"/nonexistent\" test_labels_path: \"/nonexistent\" }\n");
    EXPECT_OK(WriteFileAtomically(Path("server.textproto"), config));
    return Process::Spawn({BinaryDir() + "/server/fedsched-server",
                           "--config=" + Path("server.textproto"), "--store_path=" + store()},
                          Path(log));
  }

  std::string AddressOf(Process& server) { return ::fedsched::testing::ListeningAddress(server); }

  std::unique_ptr<v1::Coordinator::Stub> StubFor(const std::string& address) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return v1::Coordinator::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }

  v1::Task WaitForTask(v1::Coordinator::Stub& stub, const Session& who) {
    v1::Task task;
    EXPECT_TRUE(TestServer::WaitFor([&] {
      absl::StatusOr<v1::PollTaskResponse> r = PollRaw(stub, who);
      if (r.ok() && r->has_task()) task = r->task();
      return r.ok() && r->has_task();
    }));
    return task;
  }
};

TEST_F(ServerProcessTest, SigtermWithAnUploadStuckMidReadExitsCleanlyWithinTheGrace) {
  std::unique_ptr<Process> server = StartServer(
      "clients_per_round: 1\nmin_updates: 1\nmin_online_clients: 1\nround_deadline_s: 600\n"
      "heartbeat_interval_ms: 1000\nmissed_heartbeats: 60\nshutdown_grace_s: 2\n"
      "training { local_steps: 1 batch_size: 1 }\n");
  ASSERT_NE(server, nullptr);
  const std::string address = AddressOf(*server);
  auto stub = StubFor(address);
  ASSERT_OK_AND_ASSIGN(Session a, RegisterRaw(*stub, "stuck-uploader"));
  // Round 1 commits normally.
  v1::Task t1 = WaitForTask(*stub, a);
  ASSERT_OK_AND_ASSIGN(std::string model_bytes, DownloadRaw(*stub, a, t1.task_id()));
  v1::Model global;
  ASSERT_TRUE(global.ParseFromString(model_bytes));
  ASSERT_OK(UploadRaw(
      *stub, UploadMessages(a, t1, FilledLike(global, 0.25f).SerializeAsString(), 1, 1 << 20)));
  ASSERT_TRUE(server->WaitForLog("round   1 |")) << server->Log();
  // Round 2: the upload sends its header and then nothing, never half-closing.
  v1::Task t2 = WaitForTask(*stub, a);
  ASSERT_EQ(t2.round(), 2);
  std::vector<v1::UploadChunk> messages =
      UploadMessages(a, t2, FilledLike(global, 0.25f).SerializeAsString(), 1, 1 << 20);
  grpc::ClientContext context;
  v1::UploadUpdateResponse response;
  auto stuck = stub->UploadUpdate(&context, &response);
  ASSERT_TRUE(stuck->Write(messages[0]));
  absl::SleepFor(absl::Milliseconds(200));

  const absl::Time sigterm = absl::Now();
  server->Signal(SIGTERM);
  std::optional<int> code = server->Wait(absl::Seconds(30));
  const absl::Duration took = absl::Now() - sigterm;
  ASSERT_TRUE(code.has_value()) << "server still running 30 s after SIGTERM\n" << server->Log();
  EXPECT_EQ(*code, 0) << server->Log();
  // A liveness bound (shutdown_grace_s = 2 plus margin), not a speed claim.
  EXPECT_LT(took, absl::Seconds(15));
  std::printf("SIGTERM to exit: %s\n", absl::FormatDuration(took).c_str());
  EXPECT_THAT(server->Log(), HasSubstr("stopped after committed round 1"));
  EXPECT_FALSE(stuck->Finish().ok());

  // The store reopens with round 1 committed and round 2 not (it is re-planned on restart).
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> reopened, Store::Open({.path = store()}));
    ASSERT_OK_AND_ASSIGN(v1::RunMeta meta, reopened->LoadMeta());
    EXPECT_EQ(meta.committed_round(), 1);
    ASSERT_OK(reopened->LoadModel(1).status());
  }
  std::unique_ptr<Process> again =
      StartServer("clients_per_round: 1\nmin_updates: 1\nmin_online_clients: 1\n", "server2.log");
  ASSERT_TRUE(again->WaitForLog("resuming after committed round 1")) << again->Log();
  again->Signal(SIGTERM);
  EXPECT_EQ(again->Wait(absl::Seconds(30)), std::optional<int>(0)) << again->Log();
}

TEST_F(ServerProcessTest, RoundClosesAtItsDeadlineWithNoMessages) {
  std::unique_ptr<Process> server = StartServer(
      "clients_per_round: 2\nmin_updates: 1\nmin_online_clients: 2\nnum_rounds: 1\n"
      "round_closing: ROUND_CLOSING_DEADLINE\nround_deadline_s: 1.5\n"
      "heartbeat_interval_ms: 1000\nmissed_heartbeats: 60\n"
      "selection { overcommit: 1.0 }\ntraining { local_steps: 1 batch_size: 1 }\n");
  ASSERT_NE(server, nullptr);
  auto stub = StubFor(AddressOf(*server));
  ASSERT_OK_AND_ASSIGN(Session a, RegisterRaw(*stub, "a"));
  ASSERT_OK_AND_ASSIGN(Session b, RegisterRaw(*stub, "b"));
  v1::Task ta = WaitForTask(*stub, a);
  WaitForTask(*stub, b);  // b is tasked and then never speaks again
  ASSERT_OK_AND_ASSIGN(std::string model_bytes, DownloadRaw(*stub, a, ta.task_id()));
  v1::Model global;
  ASSERT_TRUE(global.ParseFromString(model_bytes));
  ASSERT_OK(UploadRaw(
      *stub, UploadMessages(a, ta, FilledLike(global, 0.25f).SerializeAsString(), 1, 1 << 20)));
  const absl::Time last_message = absl::Now();
  // From here on nobody sends anything: only the server's timer can close the round, and with
  // num_rounds = 1 the server then stops by itself: after up to 30 s more, since a finished
  // server waits for clients it heard from (a and b) to poll and learn the run is over
  // (docs/reports/RELIABILITY.md §4), and these two never poll again.
  std::optional<int> code = server->Wait(absl::Seconds(120));
  ASSERT_TRUE(code.has_value()) << server->Log();
  EXPECT_EQ(*code, 0) << server->Log();
  EXPECT_THAT(server->Log(), HasSubstr("round   1 | participants   1"));
  EXPECT_LT(absl::Now() - last_message, absl::Seconds(30 + 30));
}

TEST_F(ServerProcessTest, ClientSigkilledMidRoundIsMarkedFailedAndTheRoundProceeds) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  std::unique_ptr<Process> server = StartServer(
      "clients_per_round: 3\nmin_updates: 2\nmin_online_clients: 3\nnum_rounds: 1\n"
      "round_deadline_s: 600\nheartbeat_interval_ms: 300\nmissed_heartbeats: 3\n"
      "selection { overcommit: 1.0 }\ntraining { local_steps: 2 batch_size: 16 }\n",
      "server.log", "mlp");
  ASSERT_NE(server, nullptr);
  const std::string address = AddressOf(*server);
  std::vector<std::unique_ptr<Process>> clients;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(
        testing::ProvisionStateDir(Path(absl::StrCat("client-", i)), absl::StrCat("proc-", i)));
    std::vector<std::string> argv = {BinaryDir() + "/client/fedsched-client",
                                     absl::StrCat("--partition_index=", i),
                                     "--num_partitions=3",
                                     "--server=" + address,
                                     "--identity=" + absl::StrCat("proc-", i),
                                     "--state_dir=" + Path(absl::StrCat("client-", i)),
                                     "--log_level=info"};
    // Client 0 is slow: its emulated 40 kbit/s link keeps it in its 400 KB download for 80 s.
    if (i == 0) argv.push_back("--bandwidth_kbps=40");
    clients.push_back(Process::Spawn(argv, Path(absl::StrCat("client-", i, ".log"))));
    ASSERT_NE(clients.back(), nullptr);
  }
  ASSERT_TRUE(server->WaitForLog("round 1 planned: 3 participants")) << server->Log();
  // Let the slow client take its task, then kill it without a word.
  ASSERT_TRUE(clients[0]->WaitForLog("registered as")) << clients[0]->Log();
  absl::SleepFor(absl::Seconds(1));
  const absl::Time killed = absl::Now();
  clients[0]->Signal(SIGKILL);
  EXPECT_EQ(clients[0]->Wait(absl::Seconds(10)), std::optional<int>(128 + SIGKILL));

  // Three missed heartbeats later its task fails and the round commits with the other two.
  std::optional<int> code = server->Wait(absl::Seconds(120));
  ASSERT_TRUE(code.has_value()) << server->Log();
  EXPECT_EQ(*code, 0) << server->Log();
  const std::string log = server->Log();
  EXPECT_THAT(log, HasSubstr("failed: missed heartbeats"));
  EXPECT_THAT(log, HasSubstr("round   1 | participants   2"));
  EXPECT_LT(absl::Now() - killed, absl::Seconds(120));  // far below the 600 s deadline
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(clients[i]->Wait(absl::Seconds(30)), std::optional<int>(0)) << clients[i]->Log();
  }
}

// Against the real binaries: the store the server creates is
// private (folders 0700, files with no group or other bits; it holds identities and credential
// bindings), GetStatus refuses a caller without the operator token, and fedsched-status with
// --token_file reads the server's state while it fails without it.
TEST_F(ServerProcessTest, StoreIsPrivateAndStatusNeedsTheOperatorToken) {
  std::unique_ptr<Process> server = StartServer(
      "clients_per_round: 2\nmin_updates: 1\nmin_online_clients: 2\nnum_rounds: 1\n"
      "heartbeat_interval_ms: 1000\nmissed_heartbeats: 60\n");
  ASSERT_NE(server, nullptr);
  const std::string address = AddressOf(*server);
  auto stub = StubFor(address);
  ASSERT_OK(RegisterRaw(*stub, "device-1").status());
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(store())) {
    const auto mode = static_cast<unsigned>(entry.status().permissions());
    if (entry.is_directory()) {
      EXPECT_EQ(mode & 0777u, 0700u) << entry.path();
    } else {
      ++files;
      EXPECT_EQ(mode & 0077u, 0u) << entry.path();
    }
  }
  EXPECT_EQ(static_cast<unsigned>(std::filesystem::status(store()).permissions()) & 0777u, 0700u);
  EXPECT_GT(files, 0);
  v1::GetStatusRequest request;
  v1::GetStatusResponse response;
  {
    grpc::ClientContext context;
    EXPECT_THAT(testing::FromGrpc(stub->GetStatus(&context, request, &response)),
                testing::StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("operator token")));
  }
  const std::string status_bin = BinaryDir() + "/server/fedsched-status";
  auto refused = Process::Spawn({status_bin, "--server=" + address}, Path("status_none.log"));
  ASSERT_NE(refused, nullptr);
  std::optional<int> code = refused->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0) << refused->Log();
  auto allowed = Process::Spawn(
      {status_bin, "--server=" + address, "--token_file=" + store() + "/operator_token"},
      Path("status_token.log"));
  ASSERT_NE(allowed, nullptr);
  code = allowed->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0) << allowed->Log();
  EXPECT_THAT(allowed->Log(), HasSubstr("clients 1 registered"));
}

TEST_F(ServerProcessTest, BrokenConfigFilesExitWithAClearErrorAndTouchNothing) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {"clients_per_round: 3\nclients_per_rnd: 3\n", "clients_per_rnd"},
      {"clients_per_round: 3\nclients_per_rnd: 3\n", "line 2"},
      {"clients_per_round: -3\n", "clients_per_round must be >= 1, got -3"},
      {"round_deadline_s: \"soon\"\n", "line 1"},
      {"transport { max_message_bytes: -1 }\n", "transport.max_message_bytes"},
      {"transport { keepalive_time_ms: 5000 }\n", "transport.keepalive_time_ms"},
      {"training {\n  batch_size: 32\n", "line 3"},
      {"min_updates: 9\nclients_per_round: 4\n", "min_updates (9) > clients_per_round (4)"},
      {"training { learning_rate: nan }\n", "training.learning_rate must be a finite number"},
      {"training { learning_rate: inf }\n", "training.learning_rate must be a finite number"},
      {"listen_address: \"127.0.0.1:99999\"\n", "PORT in [0, 65535]"},
      {"aggregation { rule: AGGREGATION_RULE_KRUM krum_byzantine: -1 }\n",
       "krum_byzantine must be >= 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    ASSERT_OK(WriteFileAtomically(Path("bad.textproto"), c.text));
    auto server = Process::Spawn({BinaryDir() + "/server/fedsched-server",
                                  "--config=" + Path("bad.textproto"), "--store_path=" + store()},
                                 Path("bad.log"));
    ASSERT_NE(server, nullptr);
    EXPECT_EQ(server->Wait(absl::Seconds(30)), std::optional<int>(2));
    EXPECT_THAT(server->Log(), HasSubstr(c.expected));
    EXPECT_FALSE(std::filesystem::exists(store()));  // no store was created or touched
  }
  auto missing = Process::Spawn({BinaryDir() + "/server/fedsched-server",
                                 "--config=" + Path("nope.textproto"), "--store_path=" + store()},
                                Path("missing.log"));
  EXPECT_EQ(missing->Wait(absl::Seconds(30)), std::optional<int>(2));
  EXPECT_THAT(missing->Log(), HasSubstr("cannot open"));
  // The client binary rejects its config the same way, before loading any data.
  ASSERT_OK(WriteFileAtomically(Path("client.textproto"), "server_adress: \"127.0.0.1:1\"\n"));
  auto client = Process::Spawn({BinaryDir() + "/client/fedsched-client",
                                "--config=" + Path("client.textproto"), "--partition_index=0"},
                               Path("client.log"));
  EXPECT_EQ(client->Wait(absl::Seconds(30)), std::optional<int>(2));
  EXPECT_THAT(client->Log(), HasSubstr("server_adress"));
}

// Admission by provisioning (docs/guides/SECURITY.md "Identities and admission") against the real
// binary with its defaults: the server creates <store_path>/enrolment_key (0600); a registration
// without the identity's enrolment secret (an unprovisioned device, or a squatter naming the
// reference client's device-5 first) is refused, while the device fedsched-enroll provisioned from
// that key registers under its name, and fedsched-enroll --state_dir makes a random identity.
TEST_F(ServerProcessTest, OnlyProvisionedDevicesAreAdmittedByDefault) {
  std::unique_ptr<Process> server = StartServer("clients_per_round: 1\nmin_updates: 1\n",
                                                "server.log", "softmax", /*provision=*/false);
  ASSERT_NE(server, nullptr);
  auto stub = StubFor(AddressOf(*server));
  const std::string key = store() + "/enrolment_key";
  ASSERT_TRUE(std::filesystem::exists(key)) << server->Log();
  EXPECT_EQ(std::filesystem::status(key).permissions() &
                (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
            std::filesystem::perms::none);
  const std::string none;
  EXPECT_THAT(RegisterRaw(*stub, "device-5", 100, &none),
              testing::StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("enrolment secret")));
  const std::string guess = "c-00000000000000000000000000000000";
  EXPECT_THAT(RegisterRaw(*stub, "device-5", 100, &guess),
              testing::StatusIs(absl::StatusCode::kUnauthenticated, ::testing::_));
  auto enroll = [&](std::vector<std::string> args, const std::string& log) {
    args.insert(args.begin(), {BinaryDir() + "/server/fedsched-enroll", "--key_file=" + key});
    std::unique_ptr<Process> p = Process::Spawn(args, Path(log));
    return p == nullptr ? std::optional<int>() : p->Wait(absl::Seconds(60));
  };
  ASSERT_EQ(enroll({"--identity=device-5", "--state_dir=" + Path("device-5")}, "enroll5.log"),
            std::optional<int>(0));
  ASSERT_OK_AND_ASSIGN(std::string secret, ReadFileToString(Path("device-5/credential")));
  secret = std::string(absl::StripAsciiWhitespace(secret));
  ASSERT_OK(RegisterRaw(*stub, "device-5", 100, &secret).status());
  // Without --identity, the device's identity is random and written beside its credential.
  ASSERT_EQ(enroll({"--state_dir=" + Path("fresh")}, "enroll.log"), std::optional<int>(0));
  ASSERT_OK_AND_ASSIGN(std::string identity, ReadFileToString(Path("fresh/identity")));
  identity = std::string(absl::StripAsciiWhitespace(identity));
  EXPECT_TRUE(absl::StartsWith(identity, "device-") && identity.size() == 23) << identity;
  ASSERT_OK_AND_ASSIGN(std::string fresh, ReadFileToString(Path("fresh/credential")));
  fresh = std::string(absl::StripAsciiWhitespace(fresh));
  ASSERT_OK(RegisterRaw(*stub, identity, 100, &fresh).status());
}

}  // namespace
}  // namespace fedsched

// fedsched-ctl's commands run in-process against a JobService (over a FakeJobControl) on a real
// gRPC server on loopback: their tables and JSON, and their exit codes.
#include "server/cli/ctl_commands.h"

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/config.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/server/jobservice/job_service_harness.h"

namespace fedsched::cli {
namespace {

using ::fedsched::testing::FakeJobControl;
using ::fedsched::testing::JobServiceServer;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kToken[] = "operator-secret";

std::string SourceDir() {
  const char* dir = std::getenv("FEDSCHED_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

JobServiceOptions ServiceOptions() {
  JobServiceOptions options;
  options.operator_token = kToken;
  options.watch_poll = absl::Milliseconds(20);
  return options;
}

class CtlTest : public ::testing::Test {
 protected:
  CtlTest() : server_(&control_, ServiceOptions()), dir_(testing::FreshTestDir("ctl_test")) {}

  // Runs `command` (split at spaces) with `options`; keeps its output in out_ / err_.
  int Run(const std::string& command, CtlOptions options = {}, const std::string& token = kToken) {
    out_.str("");
    err_.str("");
    OperatorChannel channel{.channel = server_.Channel(), .token = token};
    options.deadline = absl::Seconds(60);
    return RunCtlCommand(absl::StrSplit(command, ' ', absl::SkipEmpty()), options, channel, out_,
                         err_);
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    EXPECT_OK(WriteFileAtomically(path, text));
    return path;
  }

  FakeJobControl control_;
  JobServiceServer server_;
  std::filesystem::path dir_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(CtlTest, SubmitPrintsTheRecordAndRefusesANameInUse) {
  const std::string file = SourceDir() + "/configs/jobs/fmnist_softmax.textproto";
  ASSERT_EQ(Run("submit " + file), kCtlOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("fmnist-softmax"));
  EXPECT_THAT(out_.str(), HasSubstr("state:            submitted"));
  EXPECT_THAT(out_.str(), HasSubstr("model:            softmax"));
  EXPECT_EQ(Run("submit " + file), kCtlRefused);
  EXPECT_THAT(err_.str(), HasSubstr("exists"));
  // A spec the server refuses (here: the fake's check of num_rounds) exits 4 naming the field.
  EXPECT_EQ(Run("submit " + WriteFile("bad.textproto", "name: \"x\"\nnum_rounds: -1\n")),
            kCtlRefused);
  EXPECT_THAT(err_.str(), HasSubstr("spec.num_rounds"));
}

TEST_F(CtlTest, AJobFileWithAnUnknownKeyExits2NamingTheKeyAndLine) {
  const std::string file =
      WriteFile("typo.textproto", "name: \"x\"\nnum_rounds: 3\nnum_rouns: 4\n");
  EXPECT_EQ(Run("submit " + file), kCtlUsage);
  EXPECT_THAT(err_.str(), HasSubstr("num_rouns"));
  EXPECT_THAT(err_.str(), HasSubstr("3"));   // the line
  EXPECT_THAT(control_.calls(), IsEmpty());  // nothing was sent
  EXPECT_EQ(Run("submit " + (dir_ / "missing.textproto").string()), kCtlUsage);
}

TEST_F(CtlTest, AnEmptyListPointsAtAll) {
  ASSERT_EQ(Run("list"), kCtlOk);
  EXPECT_EQ(out_.str(), "no running jobs (--all lists ended ones too)\n");
}

TEST_F(CtlTest, ListPrintsATableOrOneJsonObjectPerJob) {
  ASSERT_EQ(Run("submit " + WriteFile("a.textproto", "name: \"a\"\nnum_rounds: 3\n")), kCtlOk);
  ASSERT_EQ(Run("submit " + WriteFile("b.textproto", "name: \"b\"\nnum_rounds: 3\n")), kCtlOk);
  control_.SetState("b", v1::JOB_STATE_FAILED, "diverged");
  ASSERT_EQ(Run("list"), kCtlOk);
  EXPECT_THAT(out_.str(), HasSubstr("NAME"));
  EXPECT_THAT(out_.str(), HasSubstr("0/3"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("diverged")));
  ASSERT_EQ(Run("list", {.json = true, .all = true, .reason = ""}), kCtlOk);
  std::vector<std::string> lines = absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u);
  v1::JobRecord job;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(lines[1], &job).ok()) << lines[1];
  EXPECT_EQ(job.spec().name(), "b");
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.reason(), "diverged");
}

TEST_F(CtlTest, ExitCodesSayWhatHappened) {
  ASSERT_EQ(Run("submit " + WriteFile("a.textproto", "name: \"a\"\nnum_rounds: 3\n")), kCtlOk);
  EXPECT_EQ(Run("status nope"), kCtlNotFound);
  EXPECT_EQ(Run("status a", {}, ""), kCtlUnauthenticated);
  EXPECT_EQ(Run("status a", {}, "wrong"), kCtlUnauthenticated);
  EXPECT_EQ(Run("pause a"), kCtlRefused);  // submitted, not running
  control_.SetState("a", v1::JOB_STATE_RUNNING, "");
  EXPECT_EQ(Run("pause a"), kCtlOk);
  EXPECT_THAT(out_.str(), HasSubstr("paused"));
  EXPECT_EQ(Run("resume a"), kCtlOk);
  EXPECT_EQ(Run("cancel a", {.reason = "wrong model"}), kCtlOk);
  EXPECT_THAT(out_.str(), HasSubstr("reason:           wrong model"));
  EXPECT_EQ(Run("cancel a"), kCtlRefused);
  EXPECT_EQ(Run("frobnicate a"), kCtlUsage);
  EXPECT_EQ(Run("status"), kCtlUsage);
  EXPECT_EQ(Run("list extra"), kCtlUsage);
  EXPECT_EQ(Run(""), kCtlUsage);
}

TEST_F(CtlTest, AnUnreachableServerExits1) {
  const std::string address = server_.address();
  server_.Shutdown();
  OperatorChannel channel{
      .channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials()), .token = kToken};
  CtlOptions options;
  options.deadline = absl::Seconds(1);
  EXPECT_EQ(RunCtlCommand({"list"}, options, channel, out_, err_), kCtlOther);
}

TEST_F(CtlTest, WatchPrintsEachRoundThenTheFinalState) {
  v1::JobRecord job;
  job.mutable_spec()->set_name("a");
  job.mutable_spec()->set_num_rounds(3);
  job.set_state(v1::JOB_STATE_RUNNING);
  control_.Put(job);
  control_.Commit("a", 1, 0.5);
  control_.Commit("a", 2, 0.6);
  control_.Commit("a", 3, 0.7);
  control_.SetState("a", v1::JOB_STATE_FINISHED, "");
  ASSERT_EQ(Run("watch a", {.reason = "", .from_round = 1}), kCtlOk) << err_.str();
  const std::vector<std::string> lines = absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << out_.str();
  EXPECT_THAT(lines[0], HasSubstr("round 1  committed"));
  EXPECT_THAT(lines[0], HasSubstr("accuracy 0.5000"));
  EXPECT_THAT(lines[2], HasSubstr("round 3"));
  EXPECT_EQ(lines[3], "job a: finished at round 3, accuracy 0.7000");

  ASSERT_EQ(Run("watch a", {.json = true, .reason = "", .from_round = 3}), kCtlOk);
  const std::vector<std::string> json = absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(json.size(), 2u) << out_.str();
  v1::WatchJobEvent event;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json[0], &event).ok());
  EXPECT_EQ(event.round().round(), 3);

  control_.SetState("a", v1::JOB_STATE_CANCELLED, "stop");
  EXPECT_EQ(Run("watch a"), kCtlJobNotFinished);
  EXPECT_THAT(out_.str(), HasSubstr("job a: cancelled (stop)"));
  EXPECT_EQ(Run("watch nope"), kCtlNotFound);
}

// The binary: its flags reach the commands, and its exit status is theirs.
TEST_F(CtlTest, TheBinaryExitsWithTheCommandsCode) {
  const char* bin = std::getenv("FEDSCHED_BINARY_DIR");
  const std::string token_file = WriteFile("token", kToken);
  const std::string out = (dir_ / "ctl.out").string();
  auto run = [&](const std::string& args) {
    const int status = std::system(absl::StrCat(bin != nullptr ? bin : ".",
                                                "/server/fedsched-ctl --server=", server_.address(),
                                                " ", args, " > '", out, "' 2>&1")
                                       .c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  auto output = [&] {
    absl::StatusOr<std::string> text = ReadFileToString(out);
    return text.ok() ? *text : "";
  };
  const std::string job = WriteFile("a.textproto", "name: \"a\"\nnum_rounds: 3\n");
  EXPECT_EQ(run("--token_file=" + token_file + " submit " + job), kCtlOk) << output();
  EXPECT_EQ(run("--token_file=" + token_file + " --json list"), kCtlOk) << output();
  EXPECT_THAT(output(), HasSubstr("\"name\":\"a\""));
  EXPECT_EQ(run("list"), kCtlUnauthenticated) << output();
  EXPECT_EQ(run("--token_file=" + token_file + " cancel a --reason=done"), kCtlOk) << output();
  EXPECT_THAT(output(), HasSubstr("done"));
  EXPECT_EQ(run("--token_file=" + token_file + " status b"), kCtlNotFound) << output();
  EXPECT_EQ(run("--token_file=" + (dir_ / "no_token").string() + " list"), kCtlUsage);
  EXPECT_EQ(run("--token_file=" + token_file + " --jsn list"), kCtlUsage);  // a mistyped flag
  EXPECT_THAT(output(), HasSubstr("unknown flag --jsn"));
  run("--help");  // abseil's usage flags are not "unknown": --help prints the usage
  EXPECT_THAT(output(), HasSubstr("submit FILE"));
  EXPECT_THAT(output(), Not(HasSubstr("unknown flag")));
  const std::string typo = WriteFile("typo.textproto", "name: \"b\"\nnum_round: 3\n");
  EXPECT_EQ(run("--token_file=" + token_file + " submit " + typo), kCtlUsage);
  EXPECT_THAT(output(), HasSubstr("line 2"));
  EXPECT_THAT(output(), HasSubstr("num_round"));
}

}  // namespace
}  // namespace fedsched::cli

#include "server/jobs/job_spec.h"

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace fedsched::jobs {
namespace {

using ::fedsched::testing::IsOk;
using ::fedsched::testing::StatusIs;
using ::google::protobuf::Descriptor;
using ::google::protobuf::FieldDescriptor;
using ::google::protobuf::Message;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// JobSpec fields that are not round settings of ServerConfig.
const std::set<std::string> kJobOnlyFields = {"name", "priority", "target_accuracy", "population"};
// ServerConfig fields that are server-wide (JobServerConfig takes them from the server).
const std::set<std::string> kServerWideFields = {"listen_address",
                                                 "store_path",
                                                 "transport",
                                                 "heartbeat_interval_ms",
                                                 "missed_heartbeats",
                                                 "metrics_csv",
                                                 "shutdown_grace_s",
                                                 "security",
                                                 "pacing",
                                                 "hierarchy",
                                                 "ops",
                                                 "jobs"};

v1::JobSpec ValidSpec() {
  v1::JobSpec spec;
  spec.set_name("kbd-en.v2");
  spec.mutable_model()->set_architecture("softmax");
  spec.set_num_rounds(5);
  return spec;
}

TEST(JobSpecTest, RoundFieldsMatch) {
  const Descriptor* spec = v1::JobSpec::descriptor();
  const Descriptor* server = v1::ServerConfig::descriptor();
  for (int i = 0; i < spec->field_count(); ++i) {
    const FieldDescriptor* f = spec->field(i);
    if (kJobOnlyFields.contains(f->name())) continue;
    const FieldDescriptor* g = server->FindFieldByName(f->name());
    ASSERT_NE(g, nullptr) << "JobSpec." << f->name() << " is not a ServerConfig field";
    EXPECT_EQ(f->type(), g->type()) << f->name();
    EXPECT_EQ(f->is_repeated(), g->is_repeated()) << f->name();
    if (f->message_type() != nullptr) {
      EXPECT_EQ(f->message_type(), g->message_type()) << f->name();
    }
    if (f->enum_type() != nullptr) {
      EXPECT_EQ(f->enum_type(), g->enum_type()) << f->name();
    }
  }
  for (int i = 0; i < server->field_count(); ++i) {
    const FieldDescriptor* g = server->field(i);
    if (kServerWideFields.contains(g->name())) continue;
    EXPECT_NE(spec->FindFieldByName(g->name()), nullptr)
        << "ServerConfig." << g->name()
        << " is neither server-wide (kServerWideFields) nor a JobSpec round setting";
  }
}

// Sets field `f` of `m` to a value other than its default: scalars to 1 / true / "x" / the last
// enum value, messages by setting their first field the same way.
void SetNonDefault(Message* m, const FieldDescriptor* f) {
  const auto* r = m->GetReflection();
  if (f->is_repeated()) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) r->AddString(m, f, "x");
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) r->AddMessage(m, f);
    return;
  }
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      r->SetInt32(m, f, 7);
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      r->SetInt64(m, f, 7);
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      r->SetUInt32(m, f, 7);
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      r->SetUInt64(m, f, 7);
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      r->SetDouble(m, f, 7.5);
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      r->SetFloat(m, f, 7.5f);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      r->SetBool(m, f, true);
      break;
    case FieldDescriptor::CPPTYPE_STRING:
      r->SetString(m, f, "x");
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* e = f->enum_type();
      r->SetEnum(m, f, e->value(e->value_count() - 1));
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      Message* sub = r->MutableMessage(m, f);
      if (sub->GetDescriptor()->field_count() > 0) {
        SetNonDefault(sub, sub->GetDescriptor()->field(0));
      }
      break;
    }
  }
}

// Every field of `m`'s descriptor set to a non-default value.
template <typename M>
M AllSet() {
  M m;
  for (int i = 0; i < M::descriptor()->field_count(); ++i) {
    SetNonDefault(&m, M::descriptor()->field(i));
  }
  return m;
}

// A copy of `m` with every field but `name` cleared.
template <typename M>
M OnlyField(const M& m, const std::string& name) {
  M out = m;
  std::vector<const FieldDescriptor*> set;
  out.GetReflection()->ListFields(out, &set);
  for (const FieldDescriptor* f : set) {
    if (f->name() != name) out.GetReflection()->ClearField(&out, f);
  }
  return out;
}

// Field `name` of a JobSpec as a ServerConfig holding only it (by text: the two messages number
// their fields differently but name and type them alike).
v1::ServerConfig AsServerField(const v1::JobSpec& spec, const std::string& name) {
  std::string text;
  EXPECT_TRUE(google::protobuf::TextFormat::PrintToString(OnlyField(spec, name), &text));
  v1::ServerConfig out;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &out)) << text;
  return out;
}

bool SameMessage(const Message& a, const Message& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

std::vector<std::string> RoundFieldNames() {
  std::vector<std::string> names;
  const Descriptor* d = v1::JobSpec::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    if (!kJobOnlyFields.contains(d->field(i)->name())) names.push_back(d->field(i)->name());
  }
  return names;
}

TEST(JobSpecTest, JobServerConfigTakesRoundSettingsFromTheSpecAndTheRestFromTheServer) {
  const v1::ServerConfig server = AllSet<v1::ServerConfig>();
  const v1::JobSpec spec = AllSet<v1::JobSpec>();
  const v1::ServerConfig job = JobServerConfig(server, spec);
  for (const std::string& name : kServerWideFields) {
    if (name == "metrics_csv") continue;
    EXPECT_TRUE(SameMessage(OnlyField(job, name), OnlyField(server, name))) << name;
  }
  EXPECT_EQ(job.metrics_csv(), "") << "a job's CSV is the caller's";
  for (const std::string& name : RoundFieldNames()) {
    EXPECT_TRUE(SameMessage(OnlyField(job, name), AsServerField(spec, name))) << name;
  }
}

TEST(JobSpecTest, RoundSettingsTheSpecLeavesUnsetAreNotTheServers) {
  const v1::ServerConfig job = JobServerConfig(AllSet<v1::ServerConfig>(), v1::JobSpec());
  for (const std::string& name : RoundFieldNames()) {
    EXPECT_EQ(OnlyField(job, name).ByteSizeLong(), 0u) << name << " came from the server";
  }
}

TEST(JobSpecTest, ConfigJobSpecRoundTripsTheServersRoundSettings) {
  v1::ServerConfig server = AllSet<v1::ServerConfig>();
  const v1::JobSpec spec = ConfigJobSpec(server);
  EXPECT_EQ(spec.name(), "main");
  EXPECT_EQ(spec.priority(), 0);
  EXPECT_EQ(spec.population().ByteSizeLong(), 0u);
  const v1::ServerConfig job = JobServerConfig(server, spec);
  server.clear_metrics_csv();
  EXPECT_TRUE(SameMessage(job, server)) << job.DebugString();
  server.mutable_jobs()->set_config_job_name("keyboard");
  EXPECT_EQ(ConfigJobSpec(server).name(), "keyboard");
}

TEST(JobSpecTest, ValidSpecsPass) {
  EXPECT_THAT(ValidateJobSpec(ValidSpec()), IsOk());
  v1::JobSpec weights = ValidSpec();
  weights.mutable_model()->clear_architecture();
  weights.mutable_model()->set_initial_weights_path("/models/start.pb");
  weights.mutable_eval()->set_mode(v1::EVAL_MODE_CLIENT);
  EXPECT_THAT(ValidateJobSpec(weights), IsOk());
  v1::JobSpec target = ValidSpec();
  target.set_num_rounds(0);
  target.set_target_accuracy(0.9);
  target.mutable_eval()->set_test_images_path("t10k-images");
  target.mutable_population()->add_required_labels("lang:en");
  target.mutable_population()->set_min_examples(20);
  target.mutable_population()->set_min_contribution_interval_s(3600);
  target.set_priority(-1000);
  EXPECT_THAT(ValidateJobSpec(target), IsOk());
}

TEST(JobSpecTest, JobNames) {
  for (const std::string& good :
       std::vector<std::string>{"a", "9", "kbd-en.v2_1", std::string(63, 'x')}) {
    EXPECT_THAT(ValidateJobName(good), IsOk()) << good;
  }
  for (const char* bad : {"", "-a", ".a", "_a", "Kbd", "a b", "a/b", "é"}) {
    EXPECT_THAT(ValidateJobName(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, StartsWith("spec.name: ")))
        << bad;
  }
  EXPECT_THAT(ValidateJobName(std::string(64, 'x')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("63")));
}

struct BadSpec {
  const char* what;
  std::function<void(v1::JobSpec&)> spoil;
  const char* message_prefix;
};

TEST(JobSpecTest, ErrorsNameTheField) {
  const BadSpec cases[] = {
      {"no name", [](v1::JobSpec& s) { s.clear_name(); }, "spec.name: "},
      {"no model", [](v1::JobSpec& s) { s.clear_model(); }, "spec.model: "},
      {"no stop rule", [](v1::JobSpec& s) { s.set_num_rounds(0); }, "spec.num_rounds: "},
      {"negative rounds", [](v1::JobSpec& s) { s.set_num_rounds(-1); }, "spec.num_rounds: "},
      {"target above 1", [](v1::JobSpec& s) { s.set_target_accuracy(1.5); },
       "spec.target_accuracy: "},
      {"target NaN", [](v1::JobSpec& s) { s.set_target_accuracy(std::nan("")); },
       "spec.target_accuracy: "},
      {"target without server eval",
       [](v1::JobSpec& s) {
         s.set_target_accuracy(0.8);
         s.mutable_eval()->set_mode(v1::EVAL_MODE_CLIENT);
       },
       "spec.target_accuracy: "},
      {"empty label", [](v1::JobSpec& s) { s.mutable_population()->add_required_labels(""); },
       "spec.population.required_labels[0]: "},
      {"negative examples", [](v1::JobSpec& s) { s.mutable_population()->set_min_examples(-1); },
       "spec.population.min_examples: "},
      {"infinite interval",
       [](v1::JobSpec& s) {
         s.mutable_population()->set_min_contribution_interval_s(
             std::numeric_limits<double>::infinity());
       },
       "spec.population.min_contribution_interval_s: "},
      {"negative interval",
       [](v1::JobSpec& s) { s.mutable_population()->set_min_contribution_interval_s(-1); },
       "spec.population.min_contribution_interval_s: "},
      {"priority", [](v1::JobSpec& s) { s.set_priority(1001); }, "spec.priority: "},
      {"round setting", [](v1::JobSpec& s) { s.set_clients_per_round(-3); },
       "spec: clients_per_round"},
      {"min_updates above K",
       [](v1::JobSpec& s) {
         s.set_clients_per_round(4);
         s.set_min_updates(5);
       },
       "spec: min_updates"},
      {"training", [](v1::JobSpec& s) { s.mutable_training()->set_batch_size(-1); },
       "spec: training.batch_size"},
  };
  for (const BadSpec& c : cases) {
    v1::JobSpec spec = ValidSpec();
    c.spoil(spec);
    EXPECT_THAT(ValidateJobSpec(spec),
                StatusIs(absl::StatusCode::kInvalidArgument, StartsWith(c.message_prefix)))
        << c.what;
  }
}

}  // namespace
}  // namespace fedsched::jobs

// Text and JSON rendering of jobs and their round records for fedsched-ctl (docs/guides/JOBS.md).
// Kept apart from the binary so that its output is unit-tested. Pure; no I/O.
#ifndef FEDSCHED_SERVER_CLI_JOB_FORMAT_H_
#define FEDSCHED_SERVER_CLI_JOB_FORMAT_H_

#include <string>
#include <vector>

#include "fedsched/v1/jobs.pb.h"
#include "fedsched/v1/records.pb.h"
#include "google/protobuf/message.h"

namespace fedsched::cli {

// True for the states a job never leaves: finished, failed, cancelled.
bool JobEnded(v1::JobState state);

// One line per job under a header: name, state, committed round (of num_rounds when set),
// last test accuracy ("-" when none), priority, submission time (UTC) and the reason of a
// failed or cancelled job. Ends with a newline; "no jobs\n" for an empty list.
std::string FormatJobTable(const std::vector<v1::JobRecord>& jobs);

// The job's record as "key: value" lines: state and reason, model, rounds and target, accuracy,
// population, priority, times (UTC), store namespace.
std::string FormatJobDetail(const v1::JobRecord& job);

// One line for a round record: round, outcome, updates accepted / rejected, examples, test
// accuracy and loss (when evaluated), mean train loss and duration in seconds.
std::string FormatRoundLine(const v1::RoundRecord& round);

// One line for a job's state: "job <name>: <state>[ (<reason>)] at round <n>".
std::string FormatJobStateLine(const v1::JobRecord& job);

// `message` as one line of JSON (proto field names as in the .proto files, enums by name).
std::string ToJsonLine(const google::protobuf::Message& message);

}  // namespace fedsched::cli

#endif  // FEDSCHED_SERVER_CLI_JOB_FORMAT_H_

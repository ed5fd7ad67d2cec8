// What a committed round changes: the unit of durable state (docs/ARCHITECTURE.md
// "Persistence"). Produced by the round engine (server/round), written by a Store.
#ifndef FEDSCHED_SERVER_STORE_ROUND_COMMIT_H_
#define FEDSCHED_SERVER_STORE_ROUND_COMMIT_H_

#include <memory>
#include <string>
#include <vector>

#include "fedsched/v1/records.pb.h"
#include "fedsched/v1/tensor.pb.h"

namespace fedsched {

// Everything a committed round changes, written atomically (all of it or none of it).
struct RoundCommit {
  // The round's record; record.round() is the round being committed, committed_round + 1 +
  // earlier_records.size().
  v1::RoundRecord record;
  // Records of the rounds between the last commit and this one, oldest first, when they were not
  // committed on their own (ServerConfig.checkpoint_every_rounds > 1); their receipts, profiles
  // and planner state are merged into this commit's. The store keeps only this round's model.
  std::vector<v1::RoundRecord> earlier_records;
  // The global model after this round (shared, read-only: the engine keeps serving it).
  std::shared_ptr<const v1::Model> model;
  // `model` serialized, and its raw 32-byte SHA-256, when the caller already has them (the
  // server serialises each model once, for downloads and the store alike); null / empty = the
  // store serialises and hashes `model` itself. Must be exactly model->SerializeAsString().
  std::shared_ptr<const std::string> model_bytes;
  std::string model_sha256;
  // Receipts of the updates folded into `model`.
  std::vector<v1::Receipt> receipts;
  // Client profiles changed since the last commit (upserted).
  std::vector<v1::ClientProfile> profiles;
  // Run meta after the commit; its committed_round is set to record.round() by the store.
  v1::RunMeta meta;
  // Opaque planner state to persist with the round (empty = unchanged).
  std::string planner_state;
  // Accepted updates to keep for audit (empty unless ServerConfig.audit_updates).
  std::vector<v1::AuditedUpdate> audited_updates;
};

}  // namespace fedsched

#endif  // FEDSCHED_SERVER_STORE_ROUND_COMMIT_H_

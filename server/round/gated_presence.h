// A Presence that lets one job's round engine see only the devices a device-to-job matcher gives
// it (round::PlanningGate; docs/guides/JOBS.md "Matching devices to jobs"), for the simulator,
// whose jobs share one availability trace.
#ifndef FEDSCHED_SERVER_ROUND_GATED_PRESENCE_H_
#define FEDSCHED_SERVER_ROUND_GATED_PRESENCE_H_

#include <vector>

#include "server/round/engine.h"
#include "server/round/planning_gate.h"

namespace fedsched::round {

// Reachable through the gate: a client reachable by `base` that holds a task of the engine, or
// that the gate lets the engine plan (PlanningGate::MayPlan with its client id, which holds it
// for this job until the gate's next Settle). With a null gate, or before set_engine, exactly
// `base`. Not thread-safe (as the engine that calls it); MayPlan is called from the const
// methods, as the gate answers for the caller's job.
class GatedPresence : public Presence {
 public:
  // `base` is required; `gate` may be null (pass-through). Neither is owned; both must outlive
  // this.
  GatedPresence(const Presence* base, PlanningGate* gate) : base_(base), gate_(gate) {}

  // The engine whose book maps an index to its client id and whose tasks pass the gate
  // unasked. Not owned; set once the engine is created (it needs this Presence to be created).
  void set_engine(const RoundEngine* engine) { engine_ = engine; }

  bool IsReachable(ClientIndex index, double now_s) const override;
  void CollectReachable(double now_s, std::vector<ClientIndex>* out) const override;

 private:
  // The gate's part of IsReachable for a client `base` finds reachable.
  bool Passes(ClientIndex index, double now_s) const;

  const Presence* const base_;
  PlanningGate* const gate_;
  const RoundEngine* engine_ = nullptr;
};

}  // namespace fedsched::round

#endif  // FEDSCHED_SERVER_ROUND_GATED_PRESENCE_H_

// GatedPresence (gated_presence.h): a base Presence filtered by one job's planning gate.

#include "server/round/gated_presence.h"

#include <algorithm>

namespace fedsched::round {

bool GatedPresence::Passes(ClientIndex index, double now_s) const {
  if (gate_ == nullptr || engine_ == nullptr) return true;
  // A client working for this job stays reachable to it: the gate decides only new tasks.
  if (engine_->TaskOf(index) != nullptr) return true;
  const profile::ProfileBook& book = engine_->book();
  if (static_cast<int64_t>(index) >= book.size()) return false;
  return gate_->MayPlan(book.profile(index).client_id(), now_s);
}

bool GatedPresence::IsReachable(ClientIndex index, double now_s) const {
  return base_->IsReachable(index, now_s) && Passes(index, now_s);
}

void GatedPresence::CollectReachable(double now_s, std::vector<ClientIndex>* out) const {
  base_->CollectReachable(now_s, out);
  if (gate_ == nullptr || engine_ == nullptr) return;
  out->erase(std::remove_if(out->begin(), out->end(),
                            [&](ClientIndex index) { return !Passes(index, now_s); }),
             out->end());
}

}  // namespace fedsched::round

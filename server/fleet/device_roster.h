// The devices the job host has admitted (docs/guides/JOBS.md "Devices shared by jobs"): what each
// registration said and the session it was given, so that a job opened later registers the
// same devices, with the same client ids and tokens, without a second admission.
#ifndef FEDSCHED_SERVER_FLEET_DEVICE_ROSTER_H_
#define FEDSCHED_SERVER_FLEET_DEVICE_ROSTER_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "fedsched/v1/coordinator.pb.h"

namespace fedsched::fleet {

// One admitted device: its registration (without its credential: a job's registration needs
// no proof) and its session.
struct AdmittedDevice {
  v1::RegisterRequest request;
  std::string client_id;
  std::string session_token;
};

// Thread-safe (a lock of its own, never held while calling out).
class DeviceRoster {
 public:
  DeviceRoster() = default;
  DeviceRoster(const DeviceRoster&) = delete;
  DeviceRoster& operator=(const DeviceRoster&) = delete;

  // Adds or replaces the device of `device.client_id` (a re-registration gets a new token).
  // Returns the stored copy (credential cleared).
  AdmittedDevice Remember(const v1::RegisterRequest& request, const std::string& client_id,
                          const std::string& session_token) ABSL_LOCKS_EXCLUDED(mu_);
  // Every admitted device, in no order.
  std::vector<AdmittedDevice> All() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, AdmittedDevice> devices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fedsched::fleet

#endif  // FEDSCHED_SERVER_FLEET_DEVICE_ROSTER_H_

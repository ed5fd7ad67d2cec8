#include "server/fleet/device_roster.h"

namespace fedsched::fleet {

AdmittedDevice DeviceRoster::Remember(const v1::RegisterRequest& request,
                                      const std::string& client_id,
                                      const std::string& session_token) {
  AdmittedDevice device{request, client_id, session_token};
  // The secret proved the identity once, to the config job; nothing else needs it.
  device.request.clear_credential();
  absl::MutexLock lock(&mu_);
  devices_[client_id] = device;
  return device;
}

std::vector<AdmittedDevice> DeviceRoster::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<AdmittedDevice> all;
  all.reserve(devices_.size());
  for (const auto& [id, device] : devices_) all.push_back(device);
  return all;
}

size_t DeviceRoster::size() const {
  absl::MutexLock lock(&mu_);
  return devices_.size();
}

}  // namespace fedsched::fleet

// libFuzzer target: config parsing. Input: text given to ParseTextConfig as a ServerConfig (and
// as a ClientConfig). A config that parses and resolves (ResolveServerConfig: defaults and range
// checks) must print (ConfigToText) and re-parse to the same message, and resolving it again must
// be a no-op. Crashes, sanitizer reports and broken round trips are bugs.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/config.h"
#include "common/transport.h"
#include "fedsched/v1/config.pb.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/service/server_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedsched;
  const std::string text(reinterpret_cast<const char*>(data), size);
  v1::ClientConfig client;
  if (ParseTextConfig(text, "fuzz", &client).ok()) {
    ResolveTransport(client.transport()).IgnoreError();
  }
  v1::ServerConfig raw;
  if (!ParseTextConfig(text, "fuzz", &raw).ok()) return 0;
  absl::StatusOr<v1::ServerConfig> resolved = ResolveServerConfig(raw);
  if (!resolved.ok()) return 0;
  v1::ServerConfig reparsed;
  if (!ParseTextConfig(ConfigToText(*resolved), "printed", &reparsed).ok()) abort();
  if (!google::protobuf::util::MessageDifferencer::Equals(*resolved, reparsed)) abort();
  absl::StatusOr<v1::ServerConfig> again = ResolveServerConfig(*resolved);
  if (!again.ok() || !google::protobuf::util::MessageDifferencer::Equals(*resolved, *again)) {
    abort();
  }
  return 0;
}

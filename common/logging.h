// Logging through spdlog (Debian's libspdlog-dev). Use FEDSCHED_LOG(info, "x={}", x).
#ifndef FEDSCHED_COMMON_LOGGING_H_
#define FEDSCHED_COMMON_LOGGING_H_

#include <string>

#include "spdlog/spdlog.h"

namespace fedsched {

// Sets the global log level from a name: "trace", "debug", "info", "warn", "error", "off".
// Unknown names leave the level unchanged and return false.
bool SetLogLevel(const std::string& level);

}  // namespace fedsched

#define FEDSCHED_LOG(level, ...) ::spdlog::level(__VA_ARGS__)

#endif  // FEDSCHED_COMMON_LOGGING_H_

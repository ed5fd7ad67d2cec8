# `cmake --install BUILD [--prefix P]` installs the client SDK as a package an app can consume:
# the C++ and C APIs' headers under P/include/fedsched (with the generated protobuf
# message headers they include; no generated gRPC header is part of the public API), the SDK's
# static libraries under P/lib, a CMake package (`find_package(fedsched)` -> `fedsched::sdk`,
# `fedsched::sdk_c`, `fedsched::sdk_cache`) and a pkg-config file (`fedsched-sdk`).
# The server, RocksDB, Eigen and the reference models are not part of it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

configure_file(${PROJECT_SOURCE_DIR}/cmake/version.h.in ${PROJECT_BINARY_DIR}/fedsched/version.h
               @ONLY)

set(_fedsched_sdk_targets fedsched_sdk_c fedsched_sdk fedsched_sdk_cache fedsched_cache
    fedsched_cache_policy fedsched_trainer_api fedsched_proto fedsched_grpc_proto fedsched_common
    fedsched_transport fedsched_secagg fedsched_compress)
foreach(t ${_fedsched_sdk_targets})
  string(REPLACE "fedsched_" "" _export_name ${t})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${_export_name})
endforeach()
install(TARGETS ${_fedsched_sdk_targets} EXPORT fedschedTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT sdk)

set(_inc ${CMAKE_INSTALL_INCLUDEDIR}/fedsched)
install(FILES client/c/fedsched_c.h DESTINATION ${_inc}/client/c COMPONENT sdk)
install(FILES client/sdk/client.h client/sdk/cache_data_plan.h client/sdk/clock.h
        client/sdk/state_dir.h client/sdk/held_model.h DESTINATION ${_inc}/client/sdk COMPONENT sdk)
install(DIRECTORY client/cache/ DESTINATION ${_inc}/client/cache COMPONENT sdk
        FILES_MATCHING PATTERN "*.h")
install(FILES secagg/signing.h secagg/crypto.h DESTINATION ${_inc}/secagg COMPONENT sdk)
install(FILES models/trainer.h DESTINATION ${_inc}/models COMPONENT sdk)
install(FILES common/config.h common/dp_noise.h common/logging.h common/sha256.h common/status_macros.h
              common/transport.h
        DESTINATION ${_inc}/common COMPONENT sdk)
install(DIRECTORY ${PROJECT_BINARY_DIR}/proto/fedsched/v1/ DESTINATION ${_inc}/fedsched/v1
        COMPONENT sdk FILES_MATCHING PATTERN "*.pb.h" PATTERN "*.grpc.pb.h" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/fedsched/version.h DESTINATION ${_inc}/fedsched
        COMPONENT sdk)

set(_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/fedsched)
install(EXPORT fedschedTargets NAMESPACE fedsched:: DESTINATION ${_cmake_dir} COMPONENT sdk)
configure_package_config_file(cmake/fedschedConfig.cmake.in
  ${PROJECT_BINARY_DIR}/fedschedConfig.cmake INSTALL_DESTINATION ${_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fedschedConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fedschedConfig.cmake
              ${PROJECT_BINARY_DIR}/fedschedConfigVersion.cmake
        DESTINATION ${_cmake_dir} COMPONENT sdk)

# The .pc file finds its prefix from its own place (pkg-config's ${pcfiledir}), so that
# `cmake --install --prefix P` works whatever CMAKE_INSTALL_PREFIX was at configure time.
file(RELATIVE_PATH FEDSCHED_PC_TO_PREFIX "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
configure_file(cmake/fedsched-sdk.pc.in ${PROJECT_BINARY_DIR}/fedsched-sdk.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/fedsched-sdk.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT sdk)

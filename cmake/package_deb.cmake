# Debian packages of the install components (cmake/install_tools.cmake), made with CPack's DEB
# generator from a build folder (docs/guides/INSTALL.md):
#   cpack --config BUILD/CPackConfig.cmake -B OUT
# writes OUT/fedsched-{server,common,sim,client}_<version>-1_<arch>.deb (and fedsched-torch
# when the LibTorch programs are built). Each package's Depends come from dpkg-shlibdeps on its
# binaries, so they follow the build. fedsched-server installs to /usr, ships the systemd unit
# and /etc/fedsched/server.textproto (a conffile), and its maintainer scripts (deploy/debian)
# create the system user fedsched and /var/lib/fedsched. The SDK (`sdk`) and the Python module
# are not packaged here.
set(_fedsched_deb_dir ${PROJECT_SOURCE_DIR}/deploy/debian)

# The config the unit runs, at /etc/fedsched in the package only: an absolute destination in a
# component that `cmake --install` without --component skips.
if(TARGET fedsched-server)
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/server.textproto DESTINATION /etc/fedsched
          COMPONENT deb_etc EXCLUDE_FROM_ALL)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME fedsched)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "fedsched maintainers <fedsched@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)

set(_fedsched_deb_version "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")
set(_fedsched_common_dep "fedsched-common (= ${_fedsched_deb_version})")

set(CPACK_COMPONENT_SERVER_GROUP server)
set(CPACK_COMPONENT_DEB_ETC_GROUP server)
set(CPACK_COMPONENT_CONFIG_GROUP common)
set(CPACK_COMPONENT_SIM_GROUP sim)
set(CPACK_COMPONENT_CLIENT_GROUP client)
set(CPACK_COMPONENT_TORCH_GROUP torch)

set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "${_fedsched_common_dep}, passwd")
set(CPACK_DEBIAN_SERVER_PACKAGE_RECOMMENDS dataset-fashion-mnist)
set(CPACK_DEBIAN_SERVER_DESCRIPTION "fedsched coordination server, operator tools and systemd unit
fedsched-server plans rounds of federated learning over a fleet of devices, aggregates
their updates and keeps its state in RocksDB; fedsched-health, -status, -audit, -enroll, -ctl
and -provision operate it. The unit fedsched-server.service runs it as the user fedsched.")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
  ${_fedsched_deb_dir}/postinst ${_fedsched_deb_dir}/prerm ${_fedsched_deb_dir}/postrm
  ${_fedsched_deb_dir}/conffiles)
set(CPACK_DEBIAN_COMMON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_COMMON_DESCRIPTION "fedsched example configs and device traces
Configs of the server, clients and simulator, and the traces the simulator's configs read.")
set(CPACK_DEBIAN_SIM_PACKAGE_DEPENDS "${_fedsched_common_dep}")
set(CPACK_DEBIAN_SIM_PACKAGE_RECOMMENDS dataset-fashion-mnist)
set(CPACK_DEBIAN_SIM_DESCRIPTION "fedsched simulator
fedsched-sim replays device traces through the server's round engine with real training.")
set(CPACK_DEBIAN_CLIENT_PACKAGE_RECOMMENDS dataset-fashion-mnist)
set(CPACK_DEBIAN_CLIENT_DESCRIPTION "fedsched reference client
fedsched-client trains the reference models on Fashion-MNIST against a fedsched-server.")
set(CPACK_DEBIAN_TORCH_PACKAGE_DEPENDS "${_fedsched_common_dep}")
set(CPACK_DEBIAN_TORCH_DESCRIPTION "fedsched simulator and client with LibTorch trainers
fedsched-sim-torch and fedsched-client-torch train LibTorch models.")

get_cmake_property(_fedsched_components COMPONENTS)
set(CPACK_COMPONENTS_ALL)
foreach(c server deb_etc config sim client torch)
  if(c IN_LIST _fedsched_components)
    list(APPEND CPACK_COMPONENTS_ALL ${c})
  endif()
endforeach()
include(CPack)

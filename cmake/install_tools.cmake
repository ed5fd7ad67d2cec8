# `cmake --install BUILD --component C [--prefix P]` for the programs (docs/guides/INSTALL.md);
# the SDK's component `sdk` is cmake/install.cmake's:
#   server  fedsched-server and the operator tools (fedsched-health, -status, -audit, -enroll,
#           -ctl, -epsilon; -provision is installed by server/provision) in P/bin, their man pages in
#           P/share/man/man1, the systemd unit in P/lib/systemd/system (its ExecStart names
#           /usr/bin, the .deb's place)
#   sim     fedsched-sim
#   client  fedsched-client
#   torch   fedsched-sim-torch and fedsched-client-torch (built with libtorch-dev only; a
#           component of their own, as they need LibTorch's hundreds of MB at run time)
#   config  the example configs in P/share/fedsched/configs and the device traces the simulator's
#           configs read (P/share/fedsched/data/traces: the configs name them relative to
#           themselves, as in the source tree)
# cmake/package_deb.cmake makes Debian packages of them.
include(GNUInstallDirs)

# The programs this build makes (FEDSCHED_CLIENT_ONLY builds fedsched-client only).
function(fedsched_built_tools OUT)
  set(built)
  foreach(t ${ARGN})
    if(TARGET ${t})
      list(APPEND built ${t})
    endif()
  endforeach()
  set(${OUT} ${built} PARENT_SCOPE)
endfunction()
fedsched_built_tools(_fedsched_server_tools fedsched-server fedsched-health fedsched-status
  fedsched-audit fedsched-enroll fedsched-ctl fedsched-epsilon)
fedsched_built_tools(_fedsched_sim_tools fedsched-sim)
fedsched_built_tools(_fedsched_client_tools fedsched-client)
fedsched_built_tools(_fedsched_torch_tools fedsched-sim-torch fedsched-client-torch)

# Man pages from each tool's --help (Debian's help2man; without it, or in a cross build whose
# tools cannot run here, none are made and --help is the documentation).
if(NOT CMAKE_CROSSCOMPILING)
  find_program(FEDSCHED_HELP2MAN help2man)
endif()
set(_fedsched_man_dir ${PROJECT_BINARY_DIR}/man)
set(_fedsched_man_pages)

# Man pages of TOOLS, installed with COMPONENT (when help2man is there).
function(fedsched_man_pages COMPONENT)
  if(NOT FEDSCHED_HELP2MAN)
    return()
  endif()
  set(pages ${_fedsched_man_pages})
  foreach(t ${ARGN})
    # help2man names the page after the program it runs: a wrapper of the tool's name.
    file(GENERATE OUTPUT ${_fedsched_man_dir}/bin/${t}
      CONTENT
        "#!/bin/sh\nexec sh ${PROJECT_SOURCE_DIR}/cmake/help_for_man.sh $<TARGET_FILE:${t}> \"$@\"\n"
      FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                       WORLD_READ WORLD_EXECUTE)
    add_custom_command(OUTPUT ${_fedsched_man_dir}/${t}.1.gz
      COMMAND sh ${PROJECT_SOURCE_DIR}/cmake/make_man.sh ${FEDSCHED_HELP2MAN}
              ${_fedsched_man_dir}/bin/${t} ${PROJECT_VERSION} ${_fedsched_man_dir}/${t}
      DEPENDS ${t} ${PROJECT_SOURCE_DIR}/cmake/help_for_man.sh
              ${PROJECT_SOURCE_DIR}/cmake/make_man.sh
      COMMENT "help2man ${t}" VERBATIM)
    install(FILES ${_fedsched_man_dir}/${t}.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
            COMPONENT ${COMPONENT})
    list(APPEND pages ${_fedsched_man_dir}/${t}.1.gz)
  endforeach()
  set(_fedsched_man_pages ${pages} PARENT_SCOPE)
endfunction()

# Installs TOOLS into COMPONENT, with their man pages.
function(fedsched_install_tools COMPONENT)
  if(NOT ARGN)
    return()
  endif()
  install(TARGETS ${ARGN} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ${COMPONENT})
  fedsched_man_pages(${COMPONENT} ${ARGN})
  set(_fedsched_man_pages ${_fedsched_man_pages} PARENT_SCOPE)
endfunction()

fedsched_install_tools(server ${_fedsched_server_tools})
fedsched_install_tools(sim ${_fedsched_sim_tools})
fedsched_install_tools(client ${_fedsched_client_tools})
fedsched_install_tools(torch ${_fedsched_torch_tools})
# server/provision installs fedsched-provision itself (component server); its man page is here.
if(TARGET fedsched-provision)
  fedsched_man_pages(server fedsched-provision)
endif()
if(FEDSCHED_HELP2MAN AND _fedsched_man_pages)
  add_custom_target(fedsched-man ALL DEPENDS ${_fedsched_man_pages})
endif()

if(TARGET fedsched-server)
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/fedsched-server.service
          DESTINATION lib/systemd/system COMPONENT server)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/fedsched/configs
        COMPONENT config FILES_MATCHING PATTERN "*.textproto")
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/server.textproto
        DESTINATION ${CMAKE_INSTALL_DATADIR}/fedsched/configs/systemd COMPONENT config)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/traces DESTINATION ${CMAKE_INSTALL_DATADIR}/fedsched/data
        COMPONENT config)

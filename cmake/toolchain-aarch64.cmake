# Cross-compiles fedsched's client side for 64-bit ARM Linux (aarch64) with Debian 12's cross
# toolchain (crossbuild-essential-arm64: aarch64-linux-gnu-gcc/g++) against an arm64 sysroot made
# of Debian 12's arm64 packages (scripts/build_arm64.sh makes it with mmdebstrap and passes it).
#
#   cmake -S . -B build-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake \
#         -DFEDSCHED_ARM64_SYSROOT=/var/cache/fedsched-arm64-sysroot -DFEDSCHED_CLIENT_ONLY=ON
#
# The sysroot comes from FEDSCHED_ARM64_SYSROOT (cache variable, else the environment variable
# of that name, else /var/cache/fedsched-arm64-sysroot). Libraries, headers and CMake package
# configs are looked up in the sysroot only; programs (protoc, grpc_cpp_plugin) on the build
# machine only, since code generation runs there (see FEDSCHED_HOST_GRPC_CPP_PLUGIN in the
# top-level CMakeLists.txt).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

if(NOT FEDSCHED_ARM64_SYSROOT)
  if(DEFINED ENV{FEDSCHED_ARM64_SYSROOT})
    set(FEDSCHED_ARM64_SYSROOT "$ENV{FEDSCHED_ARM64_SYSROOT}")
  else()
    set(FEDSCHED_ARM64_SYSROOT /var/cache/fedsched-arm64-sysroot)
  endif()
endif()
set(FEDSCHED_ARM64_SYSROOT "${FEDSCHED_ARM64_SYSROOT}" CACHE PATH
    "arm64 sysroot of Debian 12 packages (scripts/build_arm64.sh)")
if(NOT EXISTS "${FEDSCHED_ARM64_SYSROOT}/usr/include/grpcpp/grpcpp.h")
  message(FATAL_ERROR "FEDSCHED_ARM64_SYSROOT=${FEDSCHED_ARM64_SYSROOT} is not an arm64 sysroot "
                      "with gRPC's headers; make one with scripts/build_arm64.sh")
endif()
# try_compile projects see these too.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES FEDSCHED_ARM64_SYSROOT)

set(CMAKE_SYSROOT "${FEDSCHED_ARM64_SYSROOT}")
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# GCC's note that std::pair's passing changed in GCC 10.1 concerns mixing objects built by GCC < 10
# with newer ones; everything here is built by GCC 12.
set(CMAKE_CXX_FLAGS_INIT -Wno-psabi)

set(CMAKE_FIND_ROOT_PATH "${FEDSCHED_ARM64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config (gRPC's package config finds re2 with it) reads the sysroot's .pc files only.
set(ENV{PKG_CONFIG_PATH} "")
set(_fedsched_pc_dirs "${FEDSCHED_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig")
string(APPEND _fedsched_pc_dirs ":${FEDSCHED_ARM64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_LIBDIR} "${_fedsched_pc_dirs}")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${FEDSCHED_ARM64_SYSROOT}")

# Runs the target's test programs CMake may build (none by default) under qemu user emulation.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L "${FEDSCHED_ARM64_SYSROOT}")

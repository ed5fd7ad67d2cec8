# Small helpers that keep every module a library with explicit dependency edges
# (in the manner of abseil's absl_cc_library), so that e.g. the client SDK cannot
# link RocksDB by accident.
#
#   fedsched_cc_library(NAME planner SRCS a.cc HDRS a.h DEPS fedsched::proto absl::status)
#     defines target fedsched_planner with alias fedsched::planner.
#   fedsched_cc_test(NAME planner_test SRCS planner_test.cc DEPS fedsched::planner)
#     defines a GoogleTest executable registered with CTest.
#   fedsched_cc_binary(NAME fedsched-server SRCS main.cc DEPS ...)

function(fedsched_cc_library)
  cmake_parse_arguments(FL "" "NAME" "SRCS;HDRS;DEPS" ${ARGN})
  set(target fedsched_${FL_NAME})
  if(FL_SRCS)
    add_library(${target} STATIC ${FL_SRCS} ${FL_HDRS})
    # Installed (cmake/install.cmake: the SDK's libraries), headers sit under include/fedsched.
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
      $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}> $<INSTALL_INTERFACE:include/fedsched>)
    target_link_libraries(${target} PUBLIC ${FL_DEPS})
  else()
    add_library(${target} INTERFACE ${FL_HDRS})
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
      $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}> $<INSTALL_INTERFACE:include/fedsched>)
    target_link_libraries(${target} INTERFACE ${FL_DEPS})
  endif()
  add_library(fedsched::${FL_NAME} ALIAS ${target})
endfunction()

function(fedsched_cc_test)
  cmake_parse_arguments(FT "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${FT_NAME} ${FT_SRCS})
  target_link_libraries(${FT_NAME} PRIVATE ${FT_DEPS} fedsched::testing GTest::gmock GTest::gtest_main)
  # The code under test is in the libraries, built with the project's flags (-O3 in Release);
  # the test sources themselves are mostly GoogleTest macros and matchers, whose -O3 code
  # generation was more than half of a clean build's compile time; -Og takes 20-30 % less
  # (docs/reports/BUILD.md) and still optimises the fixtures' loops (the last -O flag wins).
  target_compile_options(${FT_NAME} PRIVATE $<$<CONFIG:Release,RelWithDebInfo>:-Og>)
  add_test(NAME ${FT_NAME} COMMAND ${FT_NAME} WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  if(NOT FT_TIMEOUT)
    set(FT_TIMEOUT 300)
  endif()
  set_tests_properties(${FT_NAME} PROPERTIES TIMEOUT ${FT_TIMEOUT}
    ENVIRONMENT "FEDSCHED_SOURCE_DIR=${PROJECT_SOURCE_DIR};FEDSCHED_BINARY_DIR=${PROJECT_BINARY_DIR}")
  if(FT_LABELS)
    set_tests_properties(${FT_NAME} PROPERTIES LABELS "${FT_LABELS}")
  endif()
endfunction()

function(fedsched_cc_binary)
  cmake_parse_arguments(FB "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${FB_NAME} ${FB_SRCS})
  target_link_libraries(${FB_NAME} PRIVATE ${FB_DEPS})
endfunction()

# A static library of generated protobuf messages and gRPC services for PROTOS (paths relative
# to the calling folder, which is also the import root); generated code lives in the build tree.
#   fedsched_grpc_proto_library(TARGET ingest_baseline_proto PROTOS ingest_baseline.proto)
function(fedsched_grpc_proto_library)
  cmake_parse_arguments(FP "" "TARGET" "PROTOS" ${ARGN})
  add_library(${FP_TARGET} STATIC ${FP_PROTOS})
  target_link_libraries(${FP_TARGET} PUBLIC protobuf::libprotobuf gRPC::grpc++)
  target_include_directories(${FP_TARGET} PUBLIC ${CMAKE_CURRENT_BINARY_DIR})
  protobuf_generate(TARGET ${FP_TARGET} LANGUAGE cpp
    IMPORT_DIRS ${CMAKE_CURRENT_SOURCE_DIR}
    PROTOC_OUT_DIR ${CMAKE_CURRENT_BINARY_DIR})
  # CMake 3.25's protobuf_generate takes LANGUAGE grpc (singular) for the plugin step.
  protobuf_generate(TARGET ${FP_TARGET} LANGUAGE grpc
    GENERATE_EXTENSIONS .grpc.pb.h .grpc.pb.cc
    PLUGIN "protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>"
    IMPORT_DIRS ${CMAKE_CURRENT_SOURCE_DIR}
    PROTOC_OUT_DIR ${CMAKE_CURRENT_BINARY_DIR})
endfunction()

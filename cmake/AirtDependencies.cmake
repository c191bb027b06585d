# Finds every external dependency of airt, each through airt_find_package() or a check that ends in
# airt_dependency_missing(), so a missing one stops configure with one line naming the Debian
# package(s) to install. Included once from the top-level CMakeLists.txt, so the imported targets
# below are visible to every component.
#
# Targets components link:
#   CapnProto::capnp CapnProto::capnp-rpc CapnProto::kj CapnProto::kj-async  (+ capnp_generate_cpp)
#   Boost::headers Boost::system      (Asio, Beast)
#   PkgConfig::hiredis
#   airt::msgpack                     (msgpack-cxx, header-only)
#   nlohmann_json::nlohmann_json      (nlohmann-json3-dev, header-only: ray::RuntimeEnv)
#   yaml-cpp                          (libyaml-cpp-dev: the autoscaler's cluster.yaml)
#   airt::gloo                        (gloo + Threads::Threads)
#   Threads::Threads
#   GTest::gtest GTest::gtest_main GTest::gmock GTest::gmock_main   (AIRT_BUILD_TESTS)
#   benchmark::benchmark benchmark::benchmark_main                   (AIRT_BUILD_BENCH)
#   pybind11::module, pybind11_add_module(); Python3::Interpreter   (AIRT_WITH_PYTHON)
#   CUDA::cudart airt::nccl                                          (AIRT_WITH_CUDA)
include_guard(GLOBAL)

# Stops configure with one line. The leading space keeps CMake from re-wrapping the message.
function(airt_dependency_missing what packages)
  if(ARGC GREATER 2)
    set(how "${ARGV2}")
  else()
    set(how "scripts/setup does this")
  endif()
  message(FATAL_ERROR " airt: missing dependency ${what}: install the Debian package '${packages}' (${how})")
endfunction()

# Stops configure unless every named target exists (a found package of the wrong version or
# layout may lack them).
function(airt_require_targets what packages)
  cmake_parse_arguments(arg "" "HOW" "TARGETS" ${ARGN})
  foreach(target IN LISTS arg_TARGETS)
    if(NOT TARGET ${target})
      if(arg_HOW)
        airt_dependency_missing("${what} (no target ${target})" "${packages}" "${arg_HOW}")
      else()
        airt_dependency_missing("${what} (no target ${target})" "${packages}")
      endif()
    endif()
  endforeach()
endfunction()

# airt_find_package(<what> PACKAGES <debian packages> [HOW <hint>] [TARGETS <targets>...]
#                   FIND <find_package arguments>...)
# A macro, so that the variables and functions a package config defines reach the caller.
macro(airt_find_package what)
  cmake_parse_arguments(_airt_fp "" "HOW" "PACKAGES;TARGETS;FIND" ${ARGN})
  list(GET _airt_fp_FIND 0 _airt_fp_name)
  find_package(${_airt_fp_FIND} QUIET)
  if(NOT ${_airt_fp_name}_FOUND)
    if(_airt_fp_HOW)
      airt_dependency_missing("${what}" "${_airt_fp_PACKAGES}" "${_airt_fp_HOW}")
    else()
      airt_dependency_missing("${what}" "${_airt_fp_PACKAGES}")
    endif()
  endif()
  airt_require_targets("${what}" "${_airt_fp_PACKAGES}" HOW "${_airt_fp_HOW}"
                       TARGETS ${_airt_fp_TARGETS})
endmacro()

# ---- always ----------------------------------------------------------------------------------
airt_find_package("Threads (pthreads)" PACKAGES "libc6-dev" FIND Threads
                  TARGETS Threads::Threads)

airt_find_package("Cap'n Proto" PACKAGES "libcapnp-dev capnproto" FIND CapnProto CONFIG
                  TARGETS CapnProto::capnp CapnProto::capnp-rpc CapnProto::kj CapnProto::kj-async)
if(NOT EXISTS "${CAPNP_EXECUTABLE}" OR NOT EXISTS "${CAPNPC_CXX_EXECUTABLE}")
  airt_dependency_missing("Cap'n Proto compiler (capnp, capnpc-c++)" "capnproto")
endif()

airt_find_package("Boost 1.74 (Asio, Beast, system)" PACKAGES "libboost-dev libboost-system-dev"
                  FIND Boost 1.74 CONFIG COMPONENTS system
                  TARGETS Boost::headers Boost::system)

find_package(PkgConfig QUIET)
if(NOT PKG_CONFIG_FOUND)
  airt_dependency_missing("pkg-config" "pkg-config")
endif()
pkg_check_modules(hiredis QUIET IMPORTED_TARGET hiredis)
if(NOT hiredis_FOUND)
  airt_dependency_missing("hiredis" "libhiredis-dev")
endif()
airt_require_targets("hiredis" "libhiredis-dev" TARGETS PkgConfig::hiredis)

# msgpack-cxx: Debian 12 ships 4.1, whose config is msgpackc-cxx/msgpack-config.cmake with the
# target msgpackc-cxx; msgpack-cxx 6 renamed both to msgpack-cxx. airt::msgpack hides which.
find_package(msgpack-cxx CONFIG QUIET)
if(TARGET msgpack-cxx)
  add_library(airt::msgpack ALIAS msgpack-cxx)
else()
  airt_find_package("msgpack-cxx" PACKAGES "libmsgpack-cxx-dev" FIND msgpack CONFIG
                    TARGETS msgpackc-cxx)
  add_library(airt::msgpack ALIAS msgpackc-cxx)
endif()

# Gloo's exported target names no dependencies; it needs pthreads.
# nlohmann/json: ray::RuntimeEnv (airt/runtime_env.h) holds its fields as JSON, as Ray's does.
airt_find_package("nlohmann/json" PACKAGES "nlohmann-json3-dev"
                  HOW "install nlohmann-json3-dev: apt-get install nlohmann-json3-dev"
                  FIND nlohmann_json CONFIG TARGETS nlohmann_json::nlohmann_json)

airt_find_package("Gloo" PACKAGES "libgloo-dev" FIND Gloo CONFIG TARGETS gloo)
add_library(airt::gloo INTERFACE IMPORTED)
target_link_libraries(airt::gloo INTERFACE gloo Threads::Threads)

# yaml-cpp: the autoscaler's cluster config (cluster.yaml, shaped like Ray's).
airt_find_package("yaml-cpp" PACKAGES "libyaml-cpp-dev" FIND yaml-cpp CONFIG TARGETS yaml-cpp)

# Slurm and munge: the autoscaler's slurm provider runs sbatch, squeue and scancel, and its
# real-daemon test starts munged, slurmctld and slurmd. Not needed to build; a missing one is
# named by the test that needs it, so only a note here.
foreach(_airt_slurm_tool sbatch squeue scancel slurmctld slurmd munged)
  find_program(AIRT_${_airt_slurm_tool}_EXECUTABLE ${_airt_slurm_tool}
               PATHS /usr/sbin /usr/bin NO_CACHE)
  if(NOT AIRT_${_airt_slurm_tool}_EXECUTABLE)
    message(STATUS "airt: ${_airt_slurm_tool} not found: the Slurm provider's real-daemon test "
                   "is skipped (install the Debian packages 'slurm-wlm munge')")
  endif()
endforeach()

# ---- optional parts --------------------------------------------------------------------------
if(AIRT_BUILD_TESTS)
  airt_find_package("GoogleTest" PACKAGES "libgtest-dev libgmock-dev" FIND GTest CONFIG
                    TARGETS GTest::gtest GTest::gtest_main GTest::gmock GTest::gmock_main)
  include(GoogleTest)  # gtest_discover_tests()
endif()

if(AIRT_BUILD_BENCH)
  airt_find_package("Google Benchmark" PACKAGES "libbenchmark-dev" FIND benchmark CONFIG
                    TARGETS benchmark::benchmark benchmark::benchmark_main)
endif()

if(AIRT_WITH_PYTHON)
  # The python3 first on PATH may be a pyenv interpreter that does not see Debian's python3-*
  # packages; build against Debian's own unless told otherwise.
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS "/usr/bin/python3")
    set(Python3_EXECUTABLE "/usr/bin/python3")
  endif()
  airt_find_package("Python 3.11 (headers)" PACKAGES "python3-dev"
                    FIND Python3 3.11 COMPONENTS Interpreter Development.Module
                    TARGETS Python3::Interpreter Python3::Module)
  set(PYBIND11_FINDPYTHON ON)
  airt_find_package("pybind11" PACKAGES "pybind11-dev python3-pybind11" FIND pybind11 CONFIG
                    TARGETS pybind11::module pybind11::headers)
endif()

if(AIRT_WITH_CUDA)
  set(_airt_cuda_how "NVIDIA's CUDA repository; or configure with -DAIRT_WITH_CUDA=OFF")
  airt_find_package("CUDA toolkit" PACKAGES "cuda-toolkit" HOW "${_airt_cuda_how}"
                    FIND CUDAToolkit TARGETS CUDA::cudart)
  # NCCL ships no CMake config: look beside the toolkit.
  find_path(AIRT_NCCL_INCLUDE_DIR nccl.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} "${CUDAToolkit_LIBRARY_ROOT}/include")
  find_library(AIRT_NCCL_LIBRARY nccl
               HINTS ${CUDAToolkit_LIBRARY_DIR} "${CUDAToolkit_LIBRARY_ROOT}/lib"
                     "${CUDAToolkit_LIBRARY_ROOT}/lib64")
  if(NOT AIRT_NCCL_INCLUDE_DIR OR NOT AIRT_NCCL_LIBRARY)
    airt_dependency_missing("NCCL" "libnccl2 libnccl-dev" "${_airt_cuda_how}")
  endif()
  file(STRINGS "${AIRT_NCCL_INCLUDE_DIR}/nccl.h" _airt_nccl_version_lines
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  set(AIRT_NCCL_VERSION "")
  foreach(_airt_part MAJOR MINOR PATCH)
    foreach(_airt_line IN LISTS _airt_nccl_version_lines)
      if(_airt_line MATCHES "^#define NCCL_${_airt_part} +([0-9]+)")
        list(APPEND AIRT_NCCL_VERSION "${CMAKE_MATCH_1}")
      endif()
    endforeach()
  endforeach()
  list(JOIN AIRT_NCCL_VERSION "." AIRT_NCCL_VERSION)
  add_library(airt::nccl UNKNOWN IMPORTED)
  set_target_properties(airt::nccl PROPERTIES
    IMPORTED_LOCATION "${AIRT_NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${AIRT_NCCL_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES CUDA::cudart)
endif()

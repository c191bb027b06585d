# CMake helpers for programs that use airt's C++ API. A user project finds an installed airt
# (find_package(airt CONFIG REQUIRED), which includes this file: docs/install.md) or includes
# airt's source tree (add_subdirectory(path/to/airt)), and writes:
#
#   airt_remote_library(my_functions functions.cc)   # the AIRT_REMOTE code, a shared library
#   airt_driver_executable(my_driver main.cc REMOTE my_functions)
#
# The library lands next to the driver, where Init's local cluster looks for worker code by
# default (Config::code_search_path empty: the driver's folder); for a cluster started with
# `airt start`, pass that folder as --code-search-path. A position-independent executable cannot
# be dlopen'ed by workers, hence the library.

# A shared library of remote functions (and actors) that workers load from the code search path.
# Its functions may themselves submit tasks and call actors (it links the driver API too).
function(airt_remote_library name)
  add_library(${name} SHARED ${ARGN})
  target_link_libraries(${name} PRIVATE airt::api airt::driver)
  set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
endfunction()

# A driver program linking the API and its remote-function libraries (REMOTE lib...), which it
# needs to name the functions it submits.
function(airt_driver_executable name)
  cmake_parse_arguments(ARG "" "" "REMOTE" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE airt::driver ${ARG_REMOTE})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
endfunction()

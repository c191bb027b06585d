# `cmake --install build --prefix P`: airt for C++ users (docs/install.md).
#
#   P/bin/      airt (the CLI), airt-head, airt-node, airt-worker, airt-autoscaler
#   P/lib/      libairt_api.so, libairt_driver.so, libairt_collective.so, libairt_tune.a,
#               libairt_tune_sweep.a (and libairt_gpu_plugin.so with CUDA)
#   P/include/  airt/ and ray/ (the API's headers; they include only msgpack-cxx's and nlohmann/json's)
#   P/lib/cmake/airt/  airtConfig.cmake, its version file, the exported targets airt::api,
#                      airt::driver, airt::collective (airt/collective.h), airt::tune (the
#                      schedulers) and airt::tune_sweep (airt/tune/sweep.h), and AirtRemote.cmake's
#                      helpers
#
# The layout is fixed (bin/, lib/, include/), because the binaries find each other through it:
# a driver's Init looks for the daemons in ../bin from libairt_driver.so (common/daemon_process.h),
# the node finds airt-worker beside itself and the GPU plugin in ../lib (worker/internal/host.h),
# and the executables load the libraries through the RPATH $ORIGIN/../lib. Components: runtime
# (bin/, lib/) and devel (include/, lib/cmake/). The Python wheel's layout is python/CMakeLists.txt's
# component "python", which a plain `cmake --install` leaves out.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set(AIRT_INSTALL_BINDIR bin)
set(AIRT_INSTALL_LIBDIR lib)
set(AIRT_INSTALL_INCLUDEDIR include)
set(AIRT_INSTALL_CMAKEDIR ${AIRT_INSTALL_LIBDIR}/cmake/airt)

# Appends each RPATH entry `target` lacks (python/CMakeLists.txt adds $ORIGIN for the wheel).
function(airt_add_install_rpath target)
  get_target_property(rpath ${target} INSTALL_RPATH)
  if(NOT rpath)
    set(rpath "")
  endif()
  foreach(entry ${ARGN})
    if(NOT entry IN_LIST rpath)
      list(APPEND rpath "${entry}")
    endif()
  endforeach()
  set_target_properties(${target} PROPERTIES INSTALL_RPATH "${rpath}")
endfunction()

set(_airt_programs airt airt-head airt-node airt-worker airt-autoscaler)
set(_airt_libraries airt_api airt_driver airt_collective)
set(_airt_archives airt_tune airt_tune_sweep)
foreach(target ${_airt_programs})
  airt_add_install_rpath(${target} "$ORIGIN" "$ORIGIN/../${AIRT_INSTALL_LIBDIR}")
endforeach()
foreach(target ${_airt_libraries})
  airt_add_install_rpath(${target} "$ORIGIN")
endforeach()
set_target_properties(airt_api PROPERTIES EXPORT_NAME api)
set_target_properties(airt_driver PROPERTIES EXPORT_NAME driver)
set_target_properties(airt_collective PROPERTIES EXPORT_NAME collective)
set_target_properties(airt_tune PROPERTIES EXPORT_NAME tune)
set_target_properties(airt_tune_sweep PROPERTIES EXPORT_NAME tune_sweep)

install(TARGETS ${_airt_programs} RUNTIME DESTINATION ${AIRT_INSTALL_BINDIR} COMPONENT runtime)
install(TARGETS ${_airt_libraries} EXPORT airtTargets
        LIBRARY DESTINATION ${AIRT_INSTALL_LIBDIR} COMPONENT runtime)
install(TARGETS ${_airt_archives} EXPORT airtTargets
        ARCHIVE DESTINATION ${AIRT_INSTALL_LIBDIR} COMPONENT devel)
if(TARGET airt_gpu_plugin)
  install(TARGETS airt_gpu_plugin LIBRARY DESTINATION ${AIRT_INSTALL_LIBDIR} COMPONENT runtime)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/api/include/airt ${PROJECT_SOURCE_DIR}/api/include/ray
        DESTINATION ${AIRT_INSTALL_INCLUDEDIR} COMPONENT devel FILES_MATCHING PATTERN "*.h")

# airt::api's link interface names msgpack-cxx's own target (msgpack-cxx for 6.x, Debian 12's
# 4.1 msgpackc-cxx, package msgpack): the config finds the package this build used.
if(TARGET msgpack-cxx)
  set(AIRT_MSGPACK_PACKAGE msgpack-cxx)
else()
  set(AIRT_MSGPACK_PACKAGE msgpack)
endif()
install(EXPORT airtTargets NAMESPACE airt:: DESTINATION ${AIRT_INSTALL_CMAKEDIR}
        FILE airtTargets.cmake COMPONENT devel)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/airtConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/cmake/airtConfig.cmake
                              INSTALL_DESTINATION ${AIRT_INSTALL_CMAKEDIR}
                              PATH_VARS AIRT_INSTALL_BINDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/airtConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/airtConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/airtConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/AirtRemote.cmake
        DESTINATION ${AIRT_INSTALL_CMAKEDIR} COMPONENT devel)

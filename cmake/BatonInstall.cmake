# Install rules of the library: one export set per package component, the package config
# (batonConfig.cmake: components, per-component dependencies), and a pkg-config file per
# component (cmake/BatonPkgConfig.cmake). Everything here is the install component
# `development`; the daemon's files are `daemon` (daemon/CMakeLists.txt).
#
# Components, each with what it needs (the first ones it requires are loaded with it):
#   core       baton::mutex, baton::jobs       Boost >= 1.74, Threads (static: spdlog)
#   scheduler  baton::scheduler                core, date (static: nlohmann_json)
#   sql        baton::backend_sql              core (static: SOCI, SQLite3, libpq, libmariadb)
#   redis      baton::backend_redis            core (static: hiredis)
#   zookeeper  baton::backend_zookeeper        core (static: zookeeper_mt)
#   factory    baton::backends, baton::config, baton::baton
#                                              scheduler, every backend built, nlohmann_json
include(CMakePackageConfigHelpers)

set(BATON_COMPONENTS core scheduler ${BATON_BUILT_BACKENDS} factory)
set(_baton_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/baton)
foreach(component IN LISTS BATON_COMPONENTS)
  get_property(_baton_targets GLOBAL PROPERTY BATON_COMPONENT_TARGETS_${component})
  if(NOT _baton_targets)
    message(FATAL_ERROR "BatonInstall: component '${component}' has no targets")
  endif()
  install(TARGETS ${_baton_targets} EXPORT baton-${component}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
            NAMELINK_COMPONENT development
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT development)
  install(EXPORT baton-${component} NAMESPACE baton:: FILE batonTargets-${component}.cmake
          DESTINATION ${_baton_cmake_dir} COMPONENT development)
endforeach()

get_target_property(_baton_mutex_type baton_mutex TYPE)
if(_baton_mutex_type STREQUAL "STATIC_LIBRARY")
  set(BATON_STATIC_LIBRARIES ON)
else()
  set(BATON_STATIC_LIBRARIES OFF)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/batonConfig.cmake.in
  ${PROJECT_BINARY_DIR}/batonConfig.cmake INSTALL_DESTINATION ${_baton_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/batonConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/batonConfig.cmake ${PROJECT_BINARY_DIR}/batonConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/BatonDependencies.cmake
  DESTINATION ${_baton_cmake_dir} COMPONENT development)

include(BatonPkgConfig)

include(CMakePackageConfigHelpers)
get_property(_baton_targets GLOBAL PROPERTY BATON_EXPORTED_TARGETS)
install(TARGETS ${_baton_targets} EXPORT batonTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT batonTargets NAMESPACE baton:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/batonConfig.cmake.in
  ${PROJECT_BINARY_DIR}/batonConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/batonConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/batonConfig.cmake ${PROJECT_BINARY_DIR}/batonConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/BatonDependencies.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/baton)

# The .deb of the daemon, built with CPack from the install component `daemon` (scripts/package.sh
# configures a Release build with prefix /usr and runs cpack): /usr/bin/baton (static baton
# libraries inside), the systemd units in /lib/systemd/system, the man page, bash completion, the
# example config in /usr/share/doc/baton/examples and as the conffile /etc/baton/baton.json.
# Depends comes from dpkg-shlibdeps. The library (headers, static libraries, CMake and pkg-config
# files: install component `development`) is not packaged: embedders build or install it from
# source (README.md, "Install").
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME baton)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "baton")
set(CPACK_PACKAGE_CONTACT "baton maintainers <baton@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "singleton periodic jobs across a cluster (cluster-wide cron)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL daemon)
set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME baton)
set(CPACK_DEBIAN_DAEMON_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The extended description (the synopsis is CPACK_PACKAGE_DESCRIPTION_SUMMARY; cpack indents).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "Every node runs the same JSON-configured schedules of commands; for each schedule
exactly one node at a time holds a lease on a distributed mutex (SQLite, PostgreSQL,
MySQL/MariaDB, Redis or ZooKeeper) and fires the job. When that node stops or fails,
another takes the schedule over and carries on its cadence.")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# No debug info in the package (a RelWithDebInfo tree's baton is ~70 MB unstripped).
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/debian/postinst ${PROJECT_SOURCE_DIR}/cmake/debian/prerm
    ${PROJECT_SOURCE_DIR}/cmake/debian/postrm ${PROJECT_SOURCE_DIR}/cmake/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Debian's layout for what `cmake --install` puts under the prefix: units in /lib/systemd/system,
# the example config also as /etc/baton/baton.json (cmake/debian/BatonDebLayout.cmake).
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/debian/BatonDebLayout.cmake)
set(CPACK_BATON_INSTALL_FULL_BINDIR ${CMAKE_INSTALL_FULL_BINDIR})
set(CPACK_BATON_DOCDIR ${CMAKE_INSTALL_DOCDIR})
include(CPack)

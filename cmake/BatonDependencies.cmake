# Finds baton's dependencies and wraps the ones without a usable CMake package (SOCI, hiredis,
# the ZooKeeper C client) in imported targets. Installed with the package, so that consumers of
# the static libraries get the same targets. Guarded so it can be included more than once.
include(CMakeFindDependencyMacro)
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS system)
find_package(spdlog REQUIRED)

if(NOT TARGET baton::dep_asio)
  add_library(baton::dep_asio INTERFACE IMPORTED)
  # Boost 1.74's awaitable.hpp uses std::exchange without <utility>.
  set_target_properties(baton::dep_asio PROPERTIES
    INTERFACE_LINK_LIBRARIES "Boost::headers;Boost::system;Threads::Threads"
    INTERFACE_COMPILE_OPTIONS "SHELL:-include utility"
    INTERFACE_COMPILE_DEFINITIONS "BOOST_ASIO_NO_DEPRECATED")
endif()

if(BATON_WITH_SQL AND NOT TARGET baton::dep_soci)
  find_package(SQLite3 REQUIRED)
  find_package(PostgreSQL REQUIRED)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(BATON_MARIADB REQUIRED IMPORTED_TARGET libmariadb)
  find_path(BATON_SOCI_INCLUDE_DIR soci/soci.h REQUIRED)
  set(_baton_soci_libs "")
  foreach(lib IN ITEMS soci_core soci_sqlite3 soci_postgresql soci_mysql)
    find_library(BATON_${lib}_LIBRARY ${lib} REQUIRED)
    list(APPEND _baton_soci_libs ${BATON_${lib}_LIBRARY})
  endforeach()
  add_library(baton::dep_soci INTERFACE IMPORTED)
  set_target_properties(baton::dep_soci PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${BATON_SOCI_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${_baton_soci_libs};SQLite::SQLite3;PostgreSQL::PostgreSQL;PkgConfig::BATON_MARIADB;${CMAKE_DL_LIBS}")
endif()

if(BATON_WITH_REDIS AND NOT TARGET baton::dep_hiredis)
  # find_package(Hiredis) without a version is fatal on Debian, and its .pc adds
  # /usr/include/hiredis (generic header names) to the include path: find it ourselves.
  find_path(BATON_HIREDIS_INCLUDE_DIR hiredis/hiredis.h REQUIRED)
  find_library(BATON_HIREDIS_LIBRARY hiredis REQUIRED)
  add_library(baton::dep_hiredis INTERFACE IMPORTED)
  set_target_properties(baton::dep_hiredis PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${BATON_HIREDIS_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${BATON_HIREDIS_LIBRARY}")
endif()

if(BATON_WITH_ZOOKEEPER AND NOT TARGET baton::dep_zookeeper)
  find_path(BATON_ZOOKEEPER_INCLUDE_DIR zookeeper/zookeeper.h REQUIRED)
  find_library(BATON_ZOOKEEPER_LIBRARY zookeeper_mt REQUIRED)
  add_library(baton::dep_zookeeper INTERFACE IMPORTED)
  # The synchronous API is declared only with THREADED defined.
  set_target_properties(baton::dep_zookeeper PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${BATON_ZOOKEEPER_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS "THREADED"
    INTERFACE_LINK_LIBRARIES "${BATON_ZOOKEEPER_LIBRARY};Threads::Threads")
endif()

if(NOT TARGET nlohmann_json::nlohmann_json)
  find_package(nlohmann_json 3.10 QUIET)
endif()
if(NOT TARGET date::date-tz)
  find_package(date QUIET)
endif()

# Finds baton's dependencies, per component, and wraps the ones without a usable CMake package
# (SOCI, hiredis, the ZooKeeper C client) in imported targets. The build includes it for every
# component it builds; the installed package (batonConfig.cmake) includes it for the components a
# consumer asks for, so that `find_package(baton COMPONENTS sql)` never looks for hiredis.
#
#   baton_find_dependencies(<missing-var> [WITH_PRIVATE] COMPONENTS <component>...)
#
# Components: core (baton::mutex, baton::jobs), scheduler, sql, redis, zookeeper, factory
# (baton::backends, baton::config, baton::baton). WITH_PRIVATE also finds what baton's libraries
# link privately: the build always needs it, a consumer only when the libraries are static (their
# private dependencies are then link dependencies of the consumer). Sets <missing-var> to a list
# of "component: what" for every dependency not found (empty when all were found); creates each
# imported target once, so the file may be included and the function called more than once.
#
# No -include or other build-tree flag is exported: Boost 1.74's asio/awaitable.hpp uses
# std::exchange without <utility>, so a source of ours that includes an awaitable header must
# include <utility> first (none does today; tests/install compiles every installed header alone).
function(baton_find_dependencies missing_var)
  cmake_parse_arguments(ARG "WITH_PRIVATE" "" "COMPONENTS" ${ARGN})
  set(missing "")
  foreach(component IN LISTS ARG_COMPONENTS)
    if(component STREQUAL "core")
      find_package(Threads QUIET)
      find_package(Boost 1.74 QUIET COMPONENTS system)
      if(NOT Threads_FOUND)
        list(APPEND missing "core: Threads")
      endif()
      if(NOT Boost_FOUND)
        list(APPEND missing "core: Boost >= 1.74 (headers, system)")
      endif()
      if(Threads_FOUND AND Boost_FOUND AND NOT TARGET baton::dep_asio)
        add_library(baton::dep_asio INTERFACE IMPORTED)
        set_target_properties(baton::dep_asio PROPERTIES
          INTERFACE_LINK_LIBRARIES "Boost::headers;Boost::system;Threads::Threads"
          INTERFACE_COMPILE_DEFINITIONS "BOOST_ASIO_NO_DEPRECATED")
      endif()
      if(ARG_WITH_PRIVATE AND NOT TARGET spdlog::spdlog)
        find_package(spdlog QUIET)
        if(NOT spdlog_FOUND)
          list(APPEND missing "core: spdlog")
        endif()
      endif()
    elseif(component STREQUAL "scheduler")
      if(NOT TARGET date::date-tz)
        find_package(date QUIET)
        if(NOT TARGET date::date-tz)
          list(APPEND missing "scheduler: date (date::date-tz)")
        endif()
      endif()
      if(ARG_WITH_PRIVATE AND NOT TARGET nlohmann_json::nlohmann_json)
        find_package(nlohmann_json 3.10 QUIET)
        if(NOT nlohmann_json_FOUND)
          list(APPEND missing "scheduler: nlohmann_json >= 3.10")
        endif()
      endif()
    elseif(component STREQUAL "factory")
      if(NOT TARGET nlohmann_json::nlohmann_json)
        find_package(nlohmann_json 3.10 QUIET)
        if(NOT nlohmann_json_FOUND)
          list(APPEND missing "factory: nlohmann_json >= 3.10")
        endif()
      endif()
    elseif(component STREQUAL "sql")
      if(ARG_WITH_PRIVATE AND NOT TARGET baton::dep_soci)
        # The SOCI backend headers include <libpq-fe.h> and <mysql.h>: PostgreSQL and libmariadb
        # are needed too.
        find_package(SQLite3 QUIET)
        find_package(PostgreSQL QUIET)
        find_package(PkgConfig QUIET)
        if(PkgConfig_FOUND)
          pkg_check_modules(BATON_MARIADB QUIET IMPORTED_TARGET libmariadb)
        endif()
        find_path(BATON_SOCI_INCLUDE_DIR soci/soci.h)
        set(soci_libs "")
        foreach(lib IN ITEMS soci_core soci_sqlite3 soci_postgresql soci_mysql)
          find_library(BATON_${lib}_LIBRARY ${lib})
          if(NOT BATON_${lib}_LIBRARY)
            list(APPEND missing "sql: SOCI library ${lib}")
          endif()
          list(APPEND soci_libs ${BATON_${lib}_LIBRARY})
        endforeach()
        foreach(found IN ITEMS SQLite3 PostgreSQL BATON_MARIADB)
          if(NOT ${found}_FOUND)
            list(APPEND missing "sql: ${found}")
          endif()
        endforeach()
        if(NOT BATON_SOCI_INCLUDE_DIR)
          list(APPEND missing "sql: SOCI headers (soci/soci.h)")
        endif()
        if(NOT "${missing}" MATCHES "sql: ")
          add_library(baton::dep_soci INTERFACE IMPORTED)
          set_target_properties(baton::dep_soci PROPERTIES
            INTERFACE_INCLUDE_DIRECTORIES "${BATON_SOCI_INCLUDE_DIR}"
            INTERFACE_LINK_LIBRARIES
              "${soci_libs};SQLite::SQLite3;PostgreSQL::PostgreSQL;PkgConfig::BATON_MARIADB;${CMAKE_DL_LIBS}")
        endif()
      endif()
    elseif(component STREQUAL "redis")
      if(ARG_WITH_PRIVATE AND NOT TARGET baton::dep_hiredis)
        # find_package(Hiredis) without a version is fatal on Debian, and its .pc adds
        # /usr/include/hiredis (generic header names) to the include path: find it ourselves.
        find_path(BATON_HIREDIS_INCLUDE_DIR hiredis/hiredis.h)
        find_library(BATON_HIREDIS_LIBRARY hiredis)
        if(BATON_HIREDIS_INCLUDE_DIR AND BATON_HIREDIS_LIBRARY)
          add_library(baton::dep_hiredis INTERFACE IMPORTED)
          set_target_properties(baton::dep_hiredis PROPERTIES
            INTERFACE_INCLUDE_DIRECTORIES "${BATON_HIREDIS_INCLUDE_DIR}"
            INTERFACE_LINK_LIBRARIES "${BATON_HIREDIS_LIBRARY}")
        else()
          list(APPEND missing "redis: hiredis (hiredis/hiredis.h, libhiredis)")
        endif()
      endif()
    elseif(component STREQUAL "zookeeper")
      if(ARG_WITH_PRIVATE AND NOT TARGET baton::dep_zookeeper)
        find_package(Threads QUIET)
        find_path(BATON_ZOOKEEPER_INCLUDE_DIR zookeeper/zookeeper.h)
        find_library(BATON_ZOOKEEPER_LIBRARY zookeeper_mt)
        if(BATON_ZOOKEEPER_INCLUDE_DIR AND BATON_ZOOKEEPER_LIBRARY AND Threads_FOUND)
          add_library(baton::dep_zookeeper INTERFACE IMPORTED)
          # The synchronous API is declared only with THREADED defined.
          set_target_properties(baton::dep_zookeeper PROPERTIES
            INTERFACE_INCLUDE_DIRECTORIES "${BATON_ZOOKEEPER_INCLUDE_DIR}"
            INTERFACE_COMPILE_DEFINITIONS "THREADED"
            INTERFACE_LINK_LIBRARIES "${BATON_ZOOKEEPER_LIBRARY};Threads::Threads")
        else()
          list(APPEND missing
               "zookeeper: ZooKeeper C client (zookeeper/zookeeper.h, libzookeeper_mt)")
        endif()
      endif()
    else()
      list(APPEND missing "${component}: no such component")
    endif()
  endforeach()
  set(${missing_var} "${missing}" PARENT_SCOPE)
endfunction()

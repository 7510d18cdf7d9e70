# pkg-config files, one per package component (lib/pkgconfig/baton-<component>.pc) and baton.pc
# for everything built (the factory component: make_backend(), the config, every backend):
#
#   baton-core       -lbaton_jobs -lbaton_mutex         (Boost.Asio, Boost.System, Threads)
#   baton-scheduler  -lbaton_scheduler                  requires baton-core (date-tz)
#   baton-sql        -lbaton_backend_sql                requires baton-core
#   baton-redis      -lbaton_backend_redis              requires baton-core
#   baton-zookeeper  -lbaton_backend_zookeeper          requires baton-core
#   baton            -lbaton_config -lbaton_backends    requires baton-scheduler and the backends
#
# Static libraries (the default) need their private dependencies on the consumer's link line, so
# these go into Libs/Requires (plain `pkg-config --libs` gives a working link); for shared
# libraries they go into Libs.private/Requires.private. Only link flags are taken from the
# dependencies (no Requires: hiredis, whose Cflags add /usr/include/hiredis with generic header
# names, see PITFALLS): baton's installed headers include none of them. Headers need C++20.
set(_baton_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(BATON_STATIC_LIBRARIES)
  set(_baton_private "")
else()
  set(_baton_private ".private")
endif()

# _baton_pc(<file> <description> REQUIRES ... LIBS ... PRIVATE_REQUIRES ... PRIVATE_LIBS ...)
function(_baton_pc file description)
  cmake_parse_arguments(ARG "" "CFLAGS" "REQUIRES;LIBS;PRIVATE_REQUIRES;PRIVATE_LIBS" ${ARGN})
  list(JOIN ARG_REQUIRES ", " requires)
  list(JOIN ARG_PRIVATE_REQUIRES ", " private_requires)
  list(JOIN ARG_LIBS " " libs)
  list(JOIN ARG_PRIVATE_LIBS " " private_libs)
  # Relocatable: the prefix is found from the .pc file's own place (cmake --install --prefix).
  file(RELATIVE_PATH up /prefix/${_baton_pc_dir} /prefix)
  string(REGEX REPLACE "/$" "" up "${up}")
  set(text "prefix=\${pcfiledir}/${up}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}

Name: ${file}
Description: ${description}
Version: ${PROJECT_VERSION}
")
  if(BATON_STATIC_LIBRARIES)
    list(APPEND ARG_REQUIRES ${ARG_PRIVATE_REQUIRES})
    list(JOIN ARG_REQUIRES ", " requires)
    string(APPEND libs " ${private_libs}")
    set(private_requires "")
    set(private_libs "")
  endif()
  if(requires)
    string(APPEND text "Requires: ${requires}\n")
  endif()
  if(private_requires)
    string(APPEND text "Requires.private: ${private_requires}\n")
  endif()
  string(APPEND text "Cflags: -I\${includedir}${ARG_CFLAGS}\nLibs: -L\${libdir} ${libs}\n")
  if(private_libs)
    string(APPEND text "Libs.private: ${private_libs}\n")
  endif()
  string(STRIP "${text}" text)
  file(WRITE ${PROJECT_BINARY_DIR}/pkgconfig/${file}.pc "${text}\n")
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${file}.pc DESTINATION ${_baton_pc_dir}
          COMPONENT development)
endfunction()

_baton_pc(baton-core "baton: distributed mutex contract, locker and command jobs"
  CFLAGS " -DBOOST_ASIO_NO_DEPRECATED"
  LIBS -lbaton_jobs -lbaton_mutex -lboost_system -pthread
  PRIVATE_LIBS -lspdlog -lfmt)
_baton_pc(baton-scheduler "baton: scheduler (every, cron with time zones)"
  REQUIRES baton-core LIBS -lbaton_scheduler -ldate-tz)
set(_baton_factory_requires baton-scheduler)
if(sql IN_LIST BATON_BUILT_BACKENDS)
  _baton_pc(baton-sql "baton: SQL backend (SQLite, PostgreSQL, MySQL/MariaDB over SOCI)"
    REQUIRES baton-core LIBS -lbaton_backend_sql
    PRIVATE_LIBS -lsoci_sqlite3 -lsoci_postgresql -lsoci_mysql -lsoci_core -lsqlite3 -lpq
                 -lmariadb -ldl)
  list(APPEND _baton_factory_requires baton-sql)
endif()
if(redis IN_LIST BATON_BUILT_BACKENDS)
  _baton_pc(baton-redis "baton: Redis backend (hiredis)"
    REQUIRES baton-core LIBS -lbaton_backend_redis PRIVATE_LIBS -lhiredis)
  list(APPEND _baton_factory_requires baton-redis)
endif()
if(zookeeper IN_LIST BATON_BUILT_BACKENDS)
  _baton_pc(baton-zookeeper "baton: ZooKeeper backend (ZooKeeper C client, mt)"
    REQUIRES baton-core LIBS -lbaton_backend_zookeeper PRIVATE_LIBS -lzookeeper_mt)
  list(APPEND _baton_factory_requires baton-zookeeper)
endif()
_baton_pc(baton "baton: singleton periodic jobs across a cluster (every component built)"
  REQUIRES ${_baton_factory_requires} nlohmann_json LIBS -lbaton_config -lbaton_backends)

# cmake -P script behind the install tests (tests/install/CMakeLists.txt). MODE:
#   consumer    install BATON_BUILD_DIR; find_package(baton) + baton::baton; build, run
#   sql         install; find_package(baton COMPONENTS sql) + baton::backend_sql only, with any
#               look-up of hiredis/ZooKeeper failing the configure; build, run on SQLite
#   headers     install; every installed header compiles alone; no detail/ installed
#   pkg-config  install; `pkg-config --cflags --libs baton-sql` builds and links the SQL program
#   shared      configure BATON_SOURCE_DIR with BUILD_SHARED_LIBS=ON (libraries only, no
#               ZooKeeper), build, install; SONAME and version node checked with readelf; the
#               consumer builds and runs against the shared libraries
#   shared-build  only configure and build those shared libraries (scripts/test.sh does it in
#               the background while the other tests run; the test's own build is then a no-op)
# WORK_DIR is emptied first. The shared libraries build in BATON_BUILD_DIR/install-shared-libs,
# which is kept (later builds are incremental) and locked while it is used.
cmake_minimum_required(VERSION 3.20)
if(NOT MODE STREQUAL "shared-build")
  file(REMOVE_RECURSE ${WORK_DIR})
endif()
set(prefix ${WORK_DIR}/prefix)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

set(flags "")
if(BATON_SANITIZE)
  set(flags "-DCMAKE_CXX_FLAGS=-fsanitize=${BATON_SANITIZE}")
endif()

# consumer(<source dir> [CMAKE_ARGS...]): configure and build a consumer project.
function(consumer source)
  get_filename_component(name ${source} NAME)
  run("configuring ${name}" ${CMAKE_COMMAND} -S ${source} -B ${WORK_DIR}/${name}
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE} ${flags} ${ARGN})
  run("building ${name}" ${CMAKE_COMMAND} --build ${WORK_DIR}/${name} -j2)
endfunction()

if(MODE STREQUAL "shared" OR MODE STREQUAL "shared-build")
  set(build ${BATON_BUILD_DIR}/install-shared-libs)
  # One build in that directory at a time (the test waits for test.sh's background build).
  # GUARD PROCESS: cmake 3.25 crashes on GUARD FILE in script mode (-P).
  file(LOCK ${build}.lock GUARD PROCESS TIMEOUT 1800 RESULT_VARIABLE locked)
  if(NOT locked EQUAL 0)
    message(FATAL_ERROR "could not lock ${build}.lock: ${locked}")
  endif()
  string(TIMESTAMP start "%s")
  # -O0 without -g: the fastest build (about 90 s of CPU; -O2 -g takes twice as long), and the
  # test is about linking and symbols. Sanitized like the consumer, the project's way
  # (BATON_SANITIZE: no vptr check, which would need SOCI's typeinfo): a ThreadSanitizer consumer
  # on uninstrumented libraries sees their pthread calls but not their atomics, and reported a
  # race that was none (a condition variable destroyed after the last shared_ptr release).
  run("configuring the shared libraries" ${CMAKE_COMMAND} -S ${BATON_SOURCE_DIR} -B ${build}
      -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0
      -DBATON_SANITIZE=${BATON_SANITIZE}
      -DBATON_BUILD_TESTS=OFF -DBATON_BUILD_DAEMON=OFF
      -DBATON_BUILD_EXAMPLES=OFF -DBATON_WITH_ZOOKEEPER=OFF)
  run("building the shared libraries" ${CMAKE_COMMAND} --build ${build} -j2)
  string(TIMESTAMP end "%s")
  math(EXPR seconds "${end} - ${start}")
  message(STATUS "shared libraries built in ${seconds} s")
  if(MODE STREQUAL "shared-build")
    return()
  endif()
  run("installing" ${CMAKE_COMMAND} --install ${build} --prefix ${prefix})
  file(GLOB libs ${prefix}/lib/libbaton_*.so)
  list(LENGTH libs count)
  if(NOT count EQUAL 7)
    message(FATAL_ERROR "expected 7 shared libraries (mutex jobs scheduler backend_sql "
                        "backend_redis backends config), found: ${libs}")
  endif()
  file(STRINGS ${BATON_SOURCE_DIR}/CMakeLists.txt project_line REGEX "^project\\(baton VERSION")
  string(REGEX MATCH "VERSION ([0-9]+)\\.([0-9]+)\\.[0-9]+" _ "${project_line}")
  set(abi "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
  foreach(lib IN LISTS libs)
    get_filename_component(name ${lib} NAME)
    run("readelf -d ${name}" readelf -d ${lib})
    if(NOT out MATCHES "\\(SONAME\\)[^\n]*\\[${name}\\.${abi}\\]")
      message(FATAL_ERROR "${name}: no SONAME ${name}.${abi}:\n${out}")
    endif()
    # Every exported (defined, dynamic) symbol is baton's and carries the version node.
    run("nm -D ${name}" nm -D --defined-only --with-symbol-versions -C ${lib})
    string(REPLACE "\n" ";" symbols "${out}")
    set(baton_symbols 0)
    foreach(symbol IN LISTS symbols)
      if(symbol MATCHES " A BATON_${abi}$" OR symbol STREQUAL "")
        continue()
      endif()
      if(NOT symbol MATCHES "@@BATON_${abi}$")
        message(FATAL_ERROR "${name} exports an unversioned symbol: ${symbol}")
      endif()
      if(NOT symbol MATCHES " (baton::|typeinfo for baton::|typeinfo name for baton::|vtable for baton::|VTT for baton::|guard variable for baton::|non-virtual thunk to baton::|virtual thunk to baton::)")
        message(FATAL_ERROR "${name} exports a symbol that is not baton's: ${symbol}")
      endif()
      math(EXPR baton_symbols "${baton_symbols} + 1")
    endforeach()
    if(baton_symbols EQUAL 0)
      message(FATAL_ERROR "${name} exports no baton symbol")
    endif()
  endforeach()
  consumer(${CONSUMER_SOURCE_DIR} -DBATON_EXPECT_MISSING_COMPONENT=zookeeper)
  run("readelf -V consumer" readelf -V ${WORK_DIR}/consumer/consumer)
  if(NOT out MATCHES "libbaton_mutex\\.so\\.${abi}" OR NOT out MATCHES "Name: BATON_${abi}")
    message(FATAL_ERROR "the consumer does not use versioned baton symbols:\n${out}")
  endif()
  set(ENV{LD_LIBRARY_PATH} ${prefix}/lib)
  run("running the consumer" ${WORK_DIR}/consumer/consumer)
  if(NOT out MATCHES "locked with fence [1-9]")
    message(FATAL_ERROR "the consumer said: ${out}")
  endif()
  message(STATUS "consumer said: ${out}")
  return()
endif()

run("cmake --install" ${CMAKE_COMMAND} --install ${BATON_BUILD_DIR} --prefix ${prefix})

if(MODE STREQUAL "consumer")
  consumer(${CONSUMER_SOURCE_DIR})
  run("running the consumer" ${WORK_DIR}/consumer/consumer)
  if(NOT out MATCHES "locked with fence [1-9]")
    message(FATAL_ERROR "the consumer said: ${out}")
  endif()
elseif(MODE STREQUAL "sql")
  consumer(${CONSUMER_SOURCE_DIR})
  run("running the SQL consumer" ${WORK_DIR}/consumer_sql/consumer_sql ${WORK_DIR}/lock.db)
  if(NOT out MATCHES "sqlite locked with fence [1-9]" OR NOT EXISTS ${WORK_DIR}/lock.db)
    message(FATAL_ERROR "the SQL consumer said: ${out}")
  endif()
elseif(MODE STREQUAL "headers")
  consumer(${CONSUMER_SOURCE_DIR})
elseif(MODE STREQUAL "pkg-config")
  file(GLOB pc_dir ${prefix}/lib*/pkgconfig ${prefix}/lib/*/pkgconfig)
  set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
  run("pkg-config baton-sql" pkg-config --cflags --libs baton-sql)
  string(STRIP "${out}" pc_flags)
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  if(pc_flags MATCHES "hiredis|zookeeper|-include")
    message(FATAL_ERROR "pkg-config baton-sql: ${pc_flags}")
  endif()
  set(sanitize "")
  if(BATON_SANITIZE)
    set(sanitize "-fsanitize=${BATON_SANITIZE}")
  endif()
  run("c++ with pkg-config baton-sql" c++ -std=c++20 ${sanitize} ${CONSUMER_SOURCE_DIR}/main.cpp
      ${pc_flags} -o ${WORK_DIR}/consumer_sql_pc)
  run("running the pkg-config SQL program" ${WORK_DIR}/consumer_sql_pc ${WORK_DIR}/lock.db)
  if(NOT out MATCHES "sqlite locked with fence [1-9]")
    message(FATAL_ERROR "the pkg-config SQL program said: ${out}")
  endif()
else()
  message(FATAL_ERROR "run_install_test.cmake: unknown MODE '${MODE}'")
endif()
message(STATUS "${MODE}: ${out}")

# Read by ctest (a TEST_INCLUDE_FILES entry of tests/, after the gtest discovery files, whose
# baton_<binary>_TESTS lists it walks).
#
# The conformance and integration binaries run RUN_SERIAL: their tests time handovers and stop,
# restart or cut the shared test servers. A test of a parameterised backend suite (name
# "<prefix>/<suite>.<test>/<backend>") touches only that backend's server (SQLite and the memory
# backend: files and memory of its own), so it may run beside a test of another backend: it takes
# the lock of its backend instead. daemon_cluster stays alone: it bounds SIGTERM handovers
# tightly (0.8 s) with several daemons running.
foreach(test IN LISTS baton_conformance_tests_TESTS baton_integration_tests_TESTS)
  if(test MATCHES "^(backend|backends|dialects)/([a-z_]+)\\.[a-z0-9_]+/(sqlite|postgresql|mysql|redis|zookeeper|memory)( |$)"
     AND NOT CMAKE_MATCH_2 STREQUAL "daemon_cluster")
    set_tests_properties("${test}" PROPERTIES RUN_SERIAL FALSE
                                              RESOURCE_LOCK "baton_server_${CMAKE_MATCH_3}")
  endif()
endforeach()

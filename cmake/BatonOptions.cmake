# Per-target build settings (no global flags): warnings and the optional sanitizers.
add_library(baton_build_options INTERFACE)
target_compile_options(baton_build_options INTERFACE -Wall -Wextra -Wno-unused-parameter)
if(BATON_SANITIZE)
  string(REPLACE ";" "," _baton_sanitizers "${BATON_SANITIZE}")
  target_compile_options(baton_build_options INTERFACE -fsanitize=${_baton_sanitizers}
                                                       -fno-omit-frame-pointer)
  target_link_options(baton_build_options INTERFACE -fsanitize=${_baton_sanitizers})
  if(_baton_sanitizers MATCHES "undefined")
    # vptr needs the RTTI of every polymorphic class we touch; Debian's SOCI does not export
    # it (undefined typeinfo at link time), so that one check is off.
    target_compile_options(baton_build_options INTERFACE -fno-sanitize-recover=undefined
                                                         -fno-sanitize=vptr)
    target_link_options(baton_build_options INTERFACE -fno-sanitize=vptr)
  endif()
endif()

# baton_configure_target(<target>): C++20, warnings and sanitizers for one of our targets.
function(baton_configure_target target)
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "INTERFACE_LIBRARY")
    target_compile_features(${target} INTERFACE cxx_std_20)
  else()
    target_compile_features(${target} PUBLIC cxx_std_20)
    target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:baton_build_options>)
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endif()
endfunction()

# baton_add_module(<name> COMPONENT <component> SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# Builds library baton_<name> with alias baton::<name>, public headers in <dir>/include, and
# puts it into the package component <component> (core, scheduler, sql, redis, zookeeper,
# factory; see cmake/BatonInstall.cmake). Private headers live in src/ or internal/, never in
# include/: everything under include/ is installed.
function(baton_add_module name)
  cmake_parse_arguments(ARG "" "COMPONENT" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  if(NOT ARG_COMPONENT)
    message(FATAL_ERROR "baton_add_module(${name}): COMPONENT is missing")
  endif()
  add_library(baton_${name} ${ARG_SOURCES})
  add_library(baton::${name} ALIAS baton_${name})
  set_target_properties(baton_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME baton_${name})
  target_include_directories(baton_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_include_directories(baton_${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(baton_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  baton_configure_target(baton_${name})
  baton_shared_library_settings(baton_${name})
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development)
  set_property(GLOBAL APPEND PROPERTY BATON_COMPONENT_TARGETS_${ARG_COMPONENT} baton_${name})
endfunction()

# baton_shared_library_settings(<target>): for a shared library (BUILD_SHARED_LIBS=ON) the
# SONAME libbaton_<name>.so.<major>.<minor> (an ABI promise per minor version while < 1.0) and
# the GNU ld version script cmake/baton.map: baton's symbols (namespace baton, its typeinfo and
# vtables) get the version node BATON_<major>.<minor>, everything else (inline instantiations of
# Boost, spdlog, fmt, std) is local. Static libraries are left alone.
set(BATON_ABI_VERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
function(baton_shared_library_settings target)
  get_target_property(type ${target} TYPE)
  if(NOT type STREQUAL "SHARED_LIBRARY")
    return()
  endif()
  set(map ${PROJECT_BINARY_DIR}/baton.map)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/baton.map.in ${map} @ONLY)
  set_target_properties(${target} PROPERTIES
    VERSION ${PROJECT_VERSION}
    SOVERSION ${BATON_ABI_VERSION}
    LINK_DEPENDS ${map})
  target_link_options(${target} PRIVATE "LINKER:--version-script=${map}")
endfunction()

# CPACK_PRE_BUILD_SCRIPTS of the .deb (cmake/BatonPackaging.cmake): turns the staged
# `cmake --install` tree (prefix /usr) into Debian's layout before dpkg-deb packs it:
# - the systemd units move to /lib/systemd/system (Debian 12 ships units there) and name
#   /usr/bin/baton whatever bindir the build was configured with;
# - the example config is copied to /etc/baton/baton.json (a conffile);
# - the man page is gzipped.
file(GLOB_RECURSE staged_units LIST_DIRECTORIES false
     "${CPACK_TEMPORARY_DIRECTORY}/*/baton.service" "${CPACK_TEMPORARY_DIRECTORY}/baton.service")
if(NOT staged_units)
  message(FATAL_ERROR "BatonDebLayout: no baton.service under ${CPACK_TEMPORARY_DIRECTORY}")
endif()
foreach(unit IN LISTS staged_units)
  get_filename_component(unit_dir ${unit} DIRECTORY)
  # <root>/usr/<unit dir>: the root is what comes before /usr/.
  string(FIND "${unit_dir}" "/usr/" at REVERSE)
  string(SUBSTRING "${unit_dir}" 0 ${at} root)
  file(MAKE_DIRECTORY ${root}/lib/systemd/system ${root}/etc/baton)
  foreach(name IN ITEMS baton.service baton@.service)
    file(READ ${unit_dir}/${name} text)
    string(REPLACE "${CPACK_BATON_INSTALL_FULL_BINDIR}/baton" "/usr/bin/baton" text "${text}")
    file(WRITE ${root}/lib/systemd/system/${name} "${text}")
    file(REMOVE ${unit_dir}/${name})
  endforeach()
  # The directories left empty (usr/lib/systemd/system, usr/lib/systemd, usr/lib).
  set(dir ${unit_dir})
  foreach(level RANGE 2)
    file(GLOB left ${dir}/*)
    if(left)
      break()
    endif()
    get_filename_component(parent ${dir} DIRECTORY)
    file(REMOVE_RECURSE ${dir})
    set(dir ${parent})
  endforeach()
  file(COPY_FILE ${root}/usr/${CPACK_BATON_DOCDIR}/examples/baton.json ${root}/etc/baton/baton.json)
  # Man pages are compressed in a .deb (Debian policy 12.1).
  file(GLOB pages ${root}/usr/share/man/man*/*.[0-9])
  foreach(page IN LISTS pages)
    execute_process(COMMAND gzip -9n ${page} RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "BatonDebLayout: gzip ${page} failed")
    endif()
  endforeach()
endforeach()

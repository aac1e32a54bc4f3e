# `cmake --install`: TuCCL under a prefix, usable with no source or build tree.
#
#   bin/                           the tools (every executable of tools/)
#   lib/                           the stage libraries (static) and libnccl-tuner-tuccl.so
#   lib/cmake/TuCCL/               TuCCLConfig.cmake, its version file and the exported targets
#                                  TuCCL::<stage> (tuccl_lang -> TuCCL::lang, ...), TuCCL::options,
#                                  TuCCL::nvrtc (CUDA builds), TuCCL::nccl-tuner-tuccl: every
#                                  library target a listed stage's CMakeLists.txt defines
#   lib/pkgconfig/tuccl.pc         the same libraries for pkg-config
#   include/tuccl/                 the public headers (tuccl/nccl_tuner.h), and each stage's headers
#                                  under include/tuccl/<stage>/ (kernelgen/device/ among them), so
#                                  `#include "lang/algorithm.h"` works with -I<prefix>/include/tuccl
#   share/tuccl/examples/          the bundled algorithm programs, topologies and tables; the tools
#                                  find them from their own path (tools/cli.h: bundledDataDir)
#   share/doc/TuCCL/               README.md and docs/
# Included at the end of the top-level CMakeLists.txt, after every stage has defined its targets.
include(CMakePackageConfigHelpers)

set(TUCCL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/TuCCL)

# ---- Libraries and headers of every stage ----------------------------------------------------------
set(TUCCL_EXPORTED_TARGETS tuccl_options)
set(TUCCL_PKGCONFIG_LIBRARIES "")
foreach(stage IN LISTS TUCCL_STAGES)
  get_property(targets DIRECTORY ${PROJECT_SOURCE_DIR}/${stage} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "STATIC_LIBRARY")
      list(APPEND TUCCL_EXPORTED_TARGETS ${target})
      list(PREPEND TUCCL_PKGCONFIG_LIBRARIES "-l${target}")  # users before what they use
    elseif(type MATCHES "^(SHARED|MODULE|INTERFACE)_LIBRARY$")
      list(APPEND TUCCL_EXPORTED_TARGETS ${target})
    endif()
  endforeach()
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${stage}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tuccl/${stage}
          COMPONENT development FILES_MATCHING PATTERN "*.h")
endforeach()
foreach(target IN LISTS TUCCL_EXPORTED_TARGETS)
  string(REGEX REPLACE "^tuccl_" "" name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
endforeach()
install(TARGETS ${TUCCL_EXPORTED_TARGETS} EXPORT TuCCLTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tuccl/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tuccl
        COMPONENT development)

# ---- Tools, bundled data, docs ---------------------------------------------------------------------
get_property(targets DIRECTORY ${PROJECT_SOURCE_DIR}/tools PROPERTY BUILDSYSTEM_TARGETS)
foreach(target IN LISTS targets)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    # Keep the run-time paths of libraries outside the build tree (libnvrtc of the CUDA toolkit),
    # so the installed program starts without LD_LIBRARY_PATH; those into the build tree go.
    set_target_properties(${target} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
    install(TARGETS ${target} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
  endif()
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${TUCCL_INSTALL_DATADIR}/examples COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)

# ---- find_package(TuCCL) ---------------------------------------------------------------------------
install(EXPORT TuCCLTargets NAMESPACE TuCCL:: DESTINATION ${TUCCL_INSTALL_CMAKEDIR} COMPONENT development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/TuCCLConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/TuCCLConfig.cmake INSTALL_DESTINATION ${TUCCL_INSTALL_CMAKEDIR}
                              PATH_VARS CMAKE_INSTALL_BINDIR TUCCL_INSTALL_DATADIR)
# 0.x: only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/TuCCLConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/TuCCLConfig.cmake ${PROJECT_BINARY_DIR}/TuCCLConfigVersion.cmake
        DESTINATION ${TUCCL_INSTALL_CMAKEDIR} COMPONENT development)

# ---- pkg-config: tuccl.pc --------------------------------------------------------------------------
# The libraries are static: their dependencies are public requirements, and the archives are
# grouped so the linker resolves references between them in any order.
list(JOIN TUCCL_PKGCONFIG_LIBRARIES " " TUCCL_PKGCONFIG_LIBS)
set(TUCCL_PKGCONFIG_EXTRA_LIBS "")
if(TUCCL_HAVE_CUDA)
  get_target_property(nvrtc_location CUDA::nvrtc IMPORTED_LOCATION)
  get_filename_component(nvrtc_dir ${nvrtc_location} DIRECTORY)
  string(APPEND TUCCL_PKGCONFIG_EXTRA_LIBS " -L${nvrtc_dir} -Wl,-rpath,${nvrtc_dir} -lnvrtc")
endif()
foreach(library IN LISTS CMAKE_DL_LIBS)
  string(APPEND TUCCL_PKGCONFIG_EXTRA_LIBS " -l${library}")
endforeach()
string(APPEND TUCCL_PKGCONFIG_EXTRA_LIBS " -pthread")
file(RELATIVE_PATH TUCCL_PKGCONFIG_PREFIX_FROM_PCDIR /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" TUCCL_PKGCONFIG_PREFIX_FROM_PCDIR "${TUCCL_PKGCONFIG_PREFIX_FROM_PCDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/tuccl.pc.in ${PROJECT_BINARY_DIR}/tuccl.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tuccl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)

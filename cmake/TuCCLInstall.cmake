# `cmake --install`: TuCCL under a prefix, usable with no source or build tree.
#
#   bin/                           the tools (every executable of tools/)
#   lib/                           the stage libraries (static) and libnccl-tuner-tuccl.so
#   lib/cmake/TuCCL/               TuCCLConfig.cmake, its version file and the exported targets
#                                  TuCCL::<stage> (tuccl_lang -> TuCCL::lang, ...), TuCCL::options,
#                                  TuCCL::nvrtc (CUDA builds), TuCCL::nccl-tuner-tuccl: every
#                                  library target a listed stage's CMakeLists.txt defines
#   lib/pkgconfig/tuccl.pc         libtuccl for a C program: -ltuccl with its run-time path
#   lib/pkgconfig/tuccl-stages.pc  the stage libraries for a C++ program, as TuCCL::<stage>
#   include/tuccl/                 the curated API (TUCCL_INSTALLED_HEADERS below; the install test
#                                  fails above 40): the C API and plugin ABIs, and the few stage
#                                  headers a C++ consumer includes, with what they include
#   share/tuccl/examples/          the bundled algorithm programs, topologies and tables; the tools
#                                  find them from their own path (cli/cli.h: bundledDataDir)
#   share/doc/TuCCL/               README.md and docs/
# Included at the end of the top-level CMakeLists.txt, after every stage has defined its targets.
#
# Headers. An installed header is API: a consumer may include it, so changing it breaks someone.
# The install therefore holds only what a consumer needs, never a stage's internals (~160
# headers: the ResCCLang lexer/parser, the schedulers, the simulator engine, the transports, ...).
# The consumers are those README.md ("Using libtuccl", "Installing") and tests/install/ show:
#   - C programs and NCCL jobs: `#include <tuccl/tuccl.h>` (libtuccl), the tuner and net plugin
#     ABIs (tuccl/nccl_tuner.h, tuccl/nccl_net.h) and the tuner's duration intake
#     (tuccl/tuner_adapt.h), with -I<prefix>/include;
#   - C++ programs linking TuCCL::lang and TuCCL::kernelgen (tests/install/consumer: compile a
#     ResCCLang program, prove it, reach the embedded device headers), with
#     -I<prefix>/include/tuccl: lang/resccl.h, lang/semantic_check.h, lang/algorithm.h (the IR
#     they return), support/source_text.h (readSourceFile, diagnostics), kernelgen/device_headers.h;
#   - and everything those include, transitively: support/status.h, support/vocabulary.h,
#     support/buffer_layout.h (only standard headers beyond these).
# Each keeps its place, include/tuccl/<stage>/x.h, so `#include "lang/algorithm.h"` still works.
# The device headers (kernelgen/device/) are not installed: libtuccl_kernelgen embeds them.
# To publish another header, add it and whatever it includes that is not listed yet; the install
# test compiles every installed header alone from the prefix and so catches a missing one.
include(CMakePackageConfigHelpers)

set(TUCCL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/TuCCL)

# ---- Libraries of every stage -----------------------------------------------------------------------
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
endforeach()
foreach(target IN LISTS TUCCL_EXPORTED_TARGETS)
  string(REGEX REPLACE "^tuccl_" "" name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
endforeach()
install(TARGETS ${TUCCL_EXPORTED_TARGETS} EXPORT TuCCLTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime)

# ---- Headers: the curated API (see the top of this file) -------------------------------------------
# Paths in the source tree; include/tuccl/x.h goes to include/tuccl/x.h, <stage>/x.h to
# include/tuccl/<stage>/x.h.
set(TUCCL_INSTALLED_HEADERS
    # The C API of libtuccl and the NCCL plugin ABIs (C, also compiled as C by the install test).
    include/tuccl/tuccl.h
    include/tuccl/nccl_tuner.h
    include/tuccl/nccl_net.h
    include/tuccl/tuner_adapt.h
    include/tuccl/nccl_profiler.h
    # What a C++ consumer includes (tests/install/consumer/main.cc, README.md "Installing").
    lang/algorithm.h
    lang/resccl.h
    lang/semantic_check.h
    kernelgen/device_headers.h
    support/source_text.h
    # What those include.
    support/status.h
    support/vocabulary.h
    support/buffer_layout.h)
foreach(header IN LISTS TUCCL_INSTALLED_HEADERS)
  if(NOT EXISTS ${PROJECT_SOURCE_DIR}/${header})
    message(FATAL_ERROR "TUCCL_INSTALLED_HEADERS names ${header}, which does not exist")
  endif()
  get_filename_component(dir ${header} DIRECTORY)
  if(dir MATCHES "^include/")
    string(REGEX REPLACE "^include/" "" destination ${dir})
  else()
    set(destination tuccl/${dir})
  endif()
  install(FILES ${PROJECT_SOURCE_DIR}/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${destination}
          COMPONENT development)
endforeach()

# ---- Tools, bundled data, docs ---------------------------------------------------------------------
get_property(targets DIRECTORY ${PROJECT_SOURCE_DIR}/tools PROPERTY BUILDSYSTEM_TARGETS)
foreach(target IN LISTS targets)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    # Keep the run-time paths of libraries outside the build tree (libnvrtc of the CUDA toolkit),
    # so the installed program starts without LD_LIBRARY_PATH; those into the build tree go. The
    # tools that link libtuccl (tuccl-bench, tuccl-topo) find it beside them, in ../lib.
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "\$ORIGIN/../${CMAKE_INSTALL_LIBDIR}"
                                               INSTALL_RPATH_USE_LINK_PATH ON)
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

# ---- pkg-config: tuccl.pc (libtuccl), tuccl-stages.pc (the stages) --------------------------------
# The stage libraries are static: their dependencies are public requirements, and the archives are
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
configure_file(${PROJECT_SOURCE_DIR}/cmake/tuccl-stages.pc.in ${PROJECT_BINARY_DIR}/tuccl-stages.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tuccl-stages.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)
if(TARGET tuccl)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/tuccl.pc.in ${PROJECT_BINARY_DIR}/tuccl.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/tuccl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)
endif()

# What `cmake --install build --prefix P` puts under P:
#   bin/         kilnc, kiln-opt, kiln-run
#   lib/         libkilnrt.so (and libkilnrt-cuda.so with CUDA)
#   include/     kiln/runtime.h, the C API
#   lib/cmake/Kiln/   KilnConfig.cmake: Kiln::runtime, Kiln::kilnc and
#                kiln_add_bundle() for build pipelines
#   lib/pkgconfig/kilnrt.pc
# and CPack's .deb packages of the same, in three components: kiln-tools,
# kiln-runtime and kiln-dev (and kiln-runtime-cuda with the CUDA backend). The runtime needs no LLVM or MLIR library;
# the tools find libkilnrt next to them and LLVM/MLIR where they were found
# at build time.

set(KILN_CMAKE_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Kiln)

# The tools find libkilnrt in ../lib; kilnc and kiln-opt keep the LLVM/MLIR
# library directory they were linked against.
set_target_properties(kilnc kiln-opt kiln-run PROPERTIES
  INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}"
  INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS kilnc kiln-opt kiln-run
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)

set_target_properties(kilnrt PROPERTIES EXPORT_NAME runtime)
install(TARGETS kilnrt EXPORT KilnRuntimeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
  NAMELINK_COMPONENT dev)
if(KILN_CUDA_ENABLED)
  # Loaded by libkilnrt from its own directory when a session asks for CUDA.
  install(TARGETS kilnrt-cuda
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT cuda)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/runtime/include/kiln/runtime.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln COMPONENT dev)

install(EXPORT KilnRuntimeTargets NAMESPACE Kiln::
  FILE KilnRuntimeTargets.cmake
  DESTINATION ${KILN_CMAKE_PACKAGE_DIR} COMPONENT dev)
include(CMakePackageConfigHelpers)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/KilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/KilnConfig.cmake
  INSTALL_DESTINATION ${KILN_CMAKE_PACKAGE_DIR}
  PATH_VARS CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/KilnConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/KilnConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/KilnConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/KilnBundle.cmake
  DESTINATION ${KILN_CMAKE_PACKAGE_DIR} COMPONENT dev)

# The prefix relative to the .pc file, so that it holds wherever the tree is
# installed (cmake --install --prefix, the .deb packages).
file(RELATIVE_PATH KILN_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" KILN_PC_TO_PREFIX "${KILN_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/kilnrt.pc.in
  ${PROJECT_BINARY_DIR}/cmake/kilnrt.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cmake/kilnrt.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# cpack -G DEB (in the build directory): kiln-tools, kiln-runtime and
# kiln-dev .deb packages, their library dependencies from dpkg-shlibdeps.
set(CPACK_PACKAGE_NAME kiln)
set(CPACK_PACKAGE_VENDOR "Kiln")
set(CPACK_PACKAGE_CONTACT "Kiln maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "ahead-of-time compiler toolchain for training neural networks")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL tools runtime dev)
if(KILN_CUDA_ENABLED)
  # libkilnrt-cuda needs the CUDA toolkit's libraries (found through its
  # RPATH) and the NVIDIA driver's libcuda, which no Debian package gives:
  # its package declares no library dependencies.
  list(APPEND CPACK_COMPONENTS_ALL cuda)
  set(CPACK_DEBIAN_CUDA_PACKAGE_NAME kiln-runtime-cuda)
  set(CPACK_DEBIAN_CUDA_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS "kiln-runtime (= ${PROJECT_VERSION})")
  set(CPACK_COMPONENT_CUDA_DESCRIPTION
    "libkilnrt-cuda, the CUDA backend (needs the CUDA toolkit ${CUDAToolkit_VERSION} and an NVIDIA driver)")
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME kiln-tools)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME kiln-runtime)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME kiln-dev)
# Beyond the libraries dpkg-shlibdeps finds: kilnc links the CPU target's
# kernels with clang, and clang's builtins library (libclang-rt-22-dev:
# --rtlib=compiler-rt, for the bf16 conversions libgcc lacks), against
# OpenBLAS and LLVM's OpenMP runtime, which the kernels then load from
# ${KILN_OPENMP_LIBRARY_DIR}. Without the builtins kilnc runs but links no
# bundle (found installing the packages on a fresh Debian 12).
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS
  "kiln-runtime (= ${PROJECT_VERSION}), clang-22, libclang-rt-22-dev, libopenblas-dev, libomp-22-dev")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS
  "libopenblas0 | libopenblas0-pthread, libomp-22-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "kiln-runtime (= ${PROJECT_VERSION})")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "kilnc, kiln-opt and kiln-run")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "libkilnrt, the runtime of Kiln bundles")
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "the C API header, the CMake package and pkg-config file of libkilnrt")
include(CPack)

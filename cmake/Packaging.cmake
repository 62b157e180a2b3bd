# Debian packages with CPack (`cpack -G DEB` in the build tree, or the `package` target): three
# packages from the install components of CMakeLists.txt, under /usr, stripped:
#   c10d          runtime: libc10d, libc10d_rpc, libc10d_c, the backend libraries, c10drun, tools
#   c10d-dev      headers, CMake and pkg-config files, the libraries' unversioned names
#   python3-c10d  the Python package (lib/python3/dist-packages/c10d), c10d.torch where built
# Dependencies are Debian's package names, written here rather than computed (dpkg-shlibdeps
# would fail on libnccl, which no Debian package provides): the MPI and NCCL backends are
# libraries libc10d loads only when a group selects them, so their runtimes are Recommends and
# Suggests. tests/integration/install/deb_package_test.sh installs, uses and removes them.

set(CPACK_PACKAGE_NAME c10d)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "c10d")
set(CPACK_PACKAGE_CONTACT "c10d maintainers <c10d-maintainers@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "distributed-training communication: collectives, stores, RPC, launcher")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev python)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)  # xz of the unstripped tree was the slow part

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME c10d)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS
  "libc6, libstdc++6, libgcc-s1, libssl3, libgloo0, libuv1, libxxhash0")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "libopenmpi3, openmpi-bin")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "libnccl2")
# A package's Description: the summary above, then its component's lines.
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "The libraries (Gloo built in; the MPI and NCCL backends
loaded when a group selects them), the C API, RPC, the c10drun launcher and the tools.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME c10d-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "c10d (= ${PROJECT_VERSION}), libdlpack-dev, libmsgpack-cxx-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "libopenmpi-dev, pkg-config, cmake")
set(CPACK_COMPONENT_DEV_DESCRIPTION "The headers, the CMake package and the pkg-config files:
find_package(c10d) in CMake, or pkg-config --cflags --libs c10d elsewhere.")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-c10d)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "c10d (= ${PROJECT_VERSION}), python3")
set(CPACK_DEBIAN_PYTHON_PACKAGE_RECOMMENDS "python3-numpy")
set(CPACK_DEBIAN_PYTHON_PACKAGE_SUGGESTS "python3-torch")
set(CPACK_COMPONENT_PYTHON_DESCRIPTION "The Python package, torch.distributed's API over c10d
(import c10d as dist); c10d.torch is a torch.distributed backend where python3-torch is.")

include(CPack)

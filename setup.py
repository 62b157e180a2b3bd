"""Builds the wheel of the c10d Python package (pyproject.toml): the package's Python files, the
C library and what it loads, the torch.distributed backend where torch is present, and the
c10drun launcher, laid out as an install prefix inside the package (c10d/lib, c10d/bin), so
the libraries find each other through their $ORIGIN run paths as they do when installed.

C10D_BUILD_DIR names a CMake build tree to package as it is (built already; nothing is built);
without it the library is configured and built in build/wheel (tests, examples and benchmarks
off)."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as cmake:
        match = re.search(r"project\(c10d\s+VERSION\s+([0-9.]+)", cmake.read())
    if not match:
        sys.exit("setup.py: no 'project(c10d VERSION x.y.z' in CMakeLists.txt")
    return match.group(1)


def built_tree():
    given = os.environ.get("C10D_BUILD_DIR")
    if given:
        if not glob.glob(os.path.join(given, "libc10d_c.so.*")):
            sys.exit(f"setup.py: C10D_BUILD_DIR={given} holds no built libc10d_c.so; build it "
                     "first (cmake --build), or unset C10D_BUILD_DIR to build one here")
        return given
    build = os.path.join(ROOT, "build", "wheel")
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                               "-DC10D_BUILD_TESTS=OFF", "-DC10D_BUILD_EXAMPLES=OFF",
                               "-DC10D_BUILD_BENCHMARKS=OFF", f"-DC10D_PYTHON={sys.executable}"])
    subprocess.check_call(["cmake", "--build", build, "-j", str(os.cpu_count() or 2)])
    return build


def one(pattern, what):
    found = glob.glob(pattern, recursive=True)
    if not found:
        sys.exit(f"setup.py: the CMake install has no {what} ({pattern})")
    return found[0]


class BuildWithLibrary(build_py):
    def run(self):
        super().run()  # the Python files
        package = os.path.join(self.build_lib, "c10d")
        with tempfile.TemporaryDirectory() as stage:
            subprocess.check_call(["cmake", "--install", built_tree(), "--prefix", stage,
                                   "--strip"], stdout=subprocess.DEVNULL)
            libraries = os.path.dirname(one(f"{stage}/**/libc10d_c.so.*", "libc10d_c"))
            os.makedirs(os.path.join(package, "lib"), exist_ok=True)
            # Each library once, under its soname (what DT_NEEDED and the backend loader name).
            for path in glob.glob(os.path.join(libraries, "libc10d*.so.*")):
                if re.fullmatch(r"libc10d\w*\.so\.\d+", os.path.basename(path)):
                    shutil.copy(os.path.realpath(path),
                                os.path.join(package, "lib", os.path.basename(path)))
            os.makedirs(os.path.join(package, "bin"), exist_ok=True)
            shutil.copy(one(f"{stage}/bin/c10drun", "c10drun (C10D_BUILD_TOOLS=ON builds it)"),
                        os.path.join(package, "bin"))
            installed = os.path.dirname(one(f"{stage}/**/c10d/_library.py", "Python package"))
            for module in glob.glob(os.path.join(installed, "_torch_backend*.so")):
                shutil.copy(module, package)
        library = os.path.basename(one(os.path.join(package, "lib", "libc10d_c.so.*"), "libc10d_c"))
        with open(os.path.join(package, "_library.py"), "w") as out:
            out.write('"""Written by setup.py: where libc10d_c is, inside this package."""\n'
                      "import os\n\n\n"
                      "def library_path():\n"
                      "    here = os.path.dirname(os.path.abspath(__file__))\n"
                      f"    return os.path.join(here, 'lib', '{library}')\n")


class WithLibraries(Distribution):
    def has_ext_modules(self):  # a platform wheel: it holds shared libraries
        return True


setup(
    version=project_version(),
    packages=["c10d"],
    package_dir={"": "python"},
    cmdclass={"build_py": BuildWithLibrary},
    distclass=WithLibraries,
    options={"build": {"build_base": os.path.join("build", "setuptools")}},
)

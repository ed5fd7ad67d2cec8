"""Builds the `fedsched` Python module with CMake when pip installs this checkout.

pyproject.toml names setuptools as the build backend; this file gives it the one extension,
`fedsched`, which is CMake's target fedsched_python (python/CMakeLists.txt) built in Release.
Where it is built:
  FEDSCHED_BUILD_DIR=DIR   an existing CMake build folder (e.g. the project's `build`): the target
                           is brought up to date there and its module copied, so nothing is
                           compiled twice. DIR must be configured for the same interpreter
                           (the module's file name carries its ABI) and the same project version.
                           A relative DIR is taken from the checkout's root (pip runs this there).
  (unset)                  a fresh CMake build folder under setuptools' build temp
                           (build-pip/temp.*/cmake in the checkout); CMAKE_ARGS
                           (space-separated) adds options to its configure step.
The package's version is the project(VERSION) of CMakeLists.txt. Usage and the interpreter to
use: docs/guides/PYTHON.md.
"""
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent
TARGET = "fedsched_python"


def project_version():
    """x.y.z of `project(fedsched VERSION x.y.z ...)` in CMakeLists.txt; exits if it has none."""
    m = re.search(r"project\(fedsched\s+VERSION\s+([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    if not m:
        sys.exit("fedsched: CMakeLists.txt has no project(fedsched VERSION x.y.z)")
    return m.group(1)


def cache_entry(build_dir, name):
    """The value of `name` in build_dir/CMakeCache.txt, or None."""
    m = re.search(rf"^{re.escape(name)}:[A-Z]+=(.*)$",
                  (build_dir / "CMakeCache.txt").read_text(), re.MULTILINE)
    return m.group(1) if m else None


def run(command):
    """Runs `command` (printed first; pip shows it with -v); raises CalledProcessError."""
    print("fedsched:", " ".join(map(str, command)), flush=True)
    subprocess.run([str(c) for c in command], check=True)


class CMakeBuild(build_ext):
    """build_ext that builds the module with CMake instead of compiling sources itself."""

    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            sys.exit("fedsched: cmake is not installed (scripts/install_deps.sh installs it)")
        existing = os.environ.get("FEDSCHED_BUILD_DIR")
        build_dir = self.existing_build_dir(existing) if existing else self.configure()
        try:
            run(["cmake", "--build", build_dir, "--target", TARGET])
        except subprocess.CalledProcessError:
            sys.exit(f"fedsched: building {TARGET} in {build_dir} failed; CMake builds it only "
                     "when pybind11-dev and python3-dev are installed (scripts/install_deps.sh)")
        built = build_dir / "python" / ("fedsched" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not built.is_file():
            found = sorted(p.name for p in (build_dir / "python").glob("fedsched*.so"))
            sys.exit(f"fedsched: {built} is missing (found {found or 'nothing'}): {build_dir} is "
                     f"configured for another Python than {sys.executable}; reconfigure it with "
                     f"-DPython3_EXECUTABLE={sys.executable} or unset FEDSCHED_BUILD_DIR")
        dest = pathlib.Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, dest)

    def existing_build_dir(self, path):
        """FEDSCHED_BUILD_DIR checked: configured, and for this checkout's version."""
        build_dir = (ROOT / path).resolve()  # pip runs the backend in the checkout's root
        if not (build_dir / "CMakeCache.txt").is_file():
            sys.exit(f"fedsched: FEDSCHED_BUILD_DIR={path} is not a configured CMake build folder")
        version = cache_entry(build_dir, "CMAKE_PROJECT_VERSION")
        if version != project_version():
            sys.exit(f"fedsched: FEDSCHED_BUILD_DIR={path} builds version {version}, this "
                     f"checkout is {project_version()}")
        return build_dir

    def configure(self):
        """Configures a Release build folder under the build temp for this interpreter."""
        build_dir = pathlib.Path(self.build_temp).resolve() / "cmake"
        command = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                   f"-DPython3_EXECUTABLE={sys.executable}", "-DFEDSCHED_PYTHON=ON"]
        if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").is_file():
            command += ["-G", "Ninja"]  # a configured folder keeps its generator
        run(command + shlex.split(os.environ.get("CMAKE_ARGS", "")))
        return build_dir


# setuptools' own build folder is build-pip/ (ignored by git), apart from a CMake `build/`.
setup(version=project_version(),
      ext_modules=[Extension("fedsched", sources=[])],
      cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": "build-pip"}})

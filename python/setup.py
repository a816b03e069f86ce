"""`pip install ./python` from a checkout: builds the `_turboquant` extension with the project's
CMake (the same sources and options as `-DTQ_PYTHON=ON`) and installs the `turboquant` package.

No PyPI is needed: setuptools and wheel come from the system (Debian's python3-setuptools and
python3-wheel), pybind11 from pybind11-dev. On Debian the system Python is externally managed,
so install into a virtual environment that sees the system packages:

    python3 -m venv --system-site-packages ~/.venvs/tq
    ~/.venvs/tq/bin/pip install --no-build-isolation ./python

(`--no-build-isolation`: pip would otherwise try to download setuptools into a fresh build
environment.) Environment: TQ_CMAKE_ARGS (extra -D options, e.g. -DTQ_CUDA=ON), TQ_BUILD_DIR
(where CMake builds; default build/python-wheel in the checkout), CMAKE_BUILD_PARALLEL_LEVEL.
"""
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def project_version():
    # The version CMake knows (project(turboquant VERSION x.y.z) in the top CMakeLists.txt).
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        for line in f:
            if line.strip().startswith("project(") and "VERSION" in line:
                return line.split("VERSION")[1].split()[0].rstrip(")")
    return "0.0.0"


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            raise RuntimeError("turboquant: cmake is needed to build the extension "
                               "(apt-get install cmake ninja-build; see README.md)")
        build_dir = os.environ.get("TQ_BUILD_DIR", os.path.join(ROOT, "build", "python-wheel"))
        configure = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                     "-DTQ_PYTHON=ON", "-DTQ_TESTS=OFF", "-DTQ_BENCH=OFF",
                     f"-DPython3_EXECUTABLE={sys.executable}"]
        if "CXX" not in os.environ and shutil.which("g++"):
            # The compilers of CMakePresets.json: the same objects as a preset build (ccache hits).
            configure += ["-DCMAKE_CXX_COMPILER=g++", "-DCMAKE_C_COMPILER=gcc"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        configure += shlex.split(os.environ.get("TQ_CMAKE_ARGS", ""))
        subprocess.check_call(configure)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_turboquant",
                               "-j", jobs])
        built = os.path.join(build_dir, "python", "turboquant")
        modules = [f for f in os.listdir(built) if f.startswith("_turboquant") and f.endswith(".so")]
        if not modules:
            raise RuntimeError(f"turboquant: the build left no _turboquant*.so in {built}")
        dest = os.path.dirname(self.get_ext_fullpath(ext.name))
        os.makedirs(dest, exist_ok=True)
        shutil.copy2(os.path.join(built, modules[0]), self.get_ext_fullpath(ext.name))


setup(
    name="turboquant",
    version=project_version(),
    description="TurboQuant LLM inference: data-free 2/3/4-bit weights and a compressed KV cache",
    packages=["turboquant"],
    package_data={"turboquant": ["py.typed"]},
    ext_modules=[CMakeExtension("turboquant._turboquant")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    zip_safe=False,
)

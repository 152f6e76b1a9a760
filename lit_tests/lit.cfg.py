# lit configuration for tpu-tools. Tool names are substitutions pointing into
# the build; FileCheck, not and split-file come from LLVM 14.
import os
import lit.formats

config.name = "tpu-tools"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".hlo", ".llo", ".test", ".txt", ".mk"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt"]
config.test_source_root = os.path.dirname(__file__)

# Running lit directly on a folder (not via CTest) finds the build through
# --param build_dir=... or the default build/ directory.
if not hasattr(config, "tpu_build_dir"):
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    config.tpu_source_dir = src
    config.tpu_build_dir = lit_config.params.get("build_dir", os.path.join(src, "build"))
    config.llvm_tools_dir = "/usr/lib/llvm-14/bin"
else:
    config.tpu_build_dir = lit_config.params.get("build_dir", config.tpu_build_dir)

config.test_exec_root = os.path.join(config.tpu_build_dir, "lit_tests")
tools_dir = os.path.join(config.tpu_build_dir, "tools")
config.environment["PATH"] = os.pathsep.join(
    [tools_dir, config.llvm_tools_dir, "/usr/bin", "/bin"])
config.environment["NO_COLOR"] = "1"
config.environment["LC_ALL"] = "C"
corpus = os.path.normpath(os.path.join(config.tpu_source_dir, "..", "shared", "corpus"))
config.substitutions.append(("%corpus", corpus))
config.substitutions.append(("%testdata", os.path.join(config.tpu_source_dir, "testdata")))
config.substitutions.append(("%srcroot", config.tpu_source_dir))
config.substitutions.append(("%python", "/usr/bin/python3"))
for tool in ["hlo-parse", "hlo-partition", "hlo-layout", "hlo-fuse", "llo-gen", "llo-asm", "tpu-run"]:
    path = os.path.join(tools_dir, tool)
    if os.path.exists(path):
        config.available_features.add(tool)

# Headless Chromium (Debian's chromium package) renders tpu-run's HTML report;
# tests that need it say REQUIRES: chromium and are reported UNSUPPORTED
# (skipped) where it is missing.
import shutil as _shutil
if _shutil.which("chromium"):
    config.available_features.add("chromium")
else:
    lit_config.note("chromium not found: the HTML report rendering tests are skipped (apt-get install chromium)")

# Pods over several processes: mpirun (Debian's openmpi-bin) and tpu-run-mpi,
# the MPI build of tpu-run (built when CMake finds libopenmpi-dev). Tests
# that need them say REQUIRES: mpirun and are skipped (UNSUPPORTED) without.
_mpirun = _shutil.which("mpirun")
if _mpirun and os.path.exists(os.path.join(tools_dir, "mpi", "tpu-run-mpi")):
    config.available_features.add("mpirun")
    config.substitutions.append(("%mpirun", _mpirun + " --allow-run-as-root --oversubscribe"))
else:
    lit_config.note("mpirun or tpu-run-mpi not found: the MPI pod tests are skipped "
                    "(apt-get install openmpi-bin libopenmpi-dev, then rebuild)")

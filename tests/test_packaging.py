"""The wheel installs one top-level package, `pymap` (plus its dist-info and the console script)."""
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_installs_only_pymap(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(wheels), str(ROOT)], check=True, capture_output=True, timeout=300)
    wheel = next(wheels.glob("pymap-*.whl"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / ("Scripts" if os.name == "nt" else "bin") / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    before = set(os.listdir(site))
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True, timeout=300)
    added = sorted(set(os.listdir(site)) - before)
    assert [a for a in added if not a.startswith("pymap-")] == ["pymap"], added
    pkgs = {p.name for p in (site / "pymap").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert pkgs == {"seeders", "extenders", "filters", "kernels"}
    assert (env_dir / "bin" / "pymap").exists()

"""`make test` and `make autograde` set up their system packages, or stop with the one command to type.

The script is run for real with stand-ins for `id`, `sudo` and `apt-get` on a PATH that holds nothing
else of the machine's, so each branch (root, passwordless sudo, neither, nothing missing) is exercised
without installing anything.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "system_packages.sh"


def _stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


@pytest.fixture
def machine(tmp_path):
    """A bare PATH (the shell's own tools only), a log of what apt-get was asked, a chromium path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sh", "cat", "chmod", "true"):
        real = subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip()
        os.symlink(real, bin_dir / tool)
    log = tmp_path / "apt.log"
    chromium = tmp_path / "chromium"

    def run(target: str, *, uid: int, sudo_ok: bool | None, installs: bool = True):
        _stub(bin_dir, "id", f'echo {uid}')
        if sudo_ok is not None:
            _stub(bin_dir, "sudo", 'shift; exec "$@"' if sudo_ok else "exit 1")
        apt_body = f'echo "$@" >> {log}\n'
        if installs:  # an apt-get that really provides what it is asked for
            apt_body += (f'case "$*" in *install*bubblewrap*) printf "#!/bin/sh\\n" > {bin_dir}/bwrap; '
                         f'chmod +x {bin_dir}/bwrap;; esac\n'
                         f'case "$*" in *install*chromium*) printf "#!/bin/sh\\n" > {chromium}; '
                         f'chmod +x {chromium};; esac')
        _stub(bin_dir, "apt-get", apt_body)
        env = {"PATH": str(bin_dir), "CHROMIUM": str(chromium), "HOME": str(tmp_path)}
        return subprocess.run([str(bin_dir / "bash"), str(SCRIPT), target], env=env,
                              capture_output=True, text=True)

    run.log, run.bin, run.chromium = log, bin_dir, chromium
    return run


def test_as_root_the_missing_packages_are_installed_with_apt(machine):
    result = machine("test", uid=0, sudo_ok=None)
    assert result.returncode == 0, result.stderr
    calls = machine.log.read_text().splitlines()
    assert calls[0].startswith("update")
    assert "install" in calls[1] and "bubblewrap" in calls[1] and "chromium" in calls[1]
    assert (machine.bin / "bwrap").exists() and machine.chromium.exists()


def test_a_user_with_passwordless_sudo_installs_through_sudo(machine):
    result = machine("autograde", uid=1000, sudo_ok=True)
    assert result.returncode == 0, result.stderr
    install = machine.log.read_text().splitlines()[1]
    assert "bubblewrap" in install and "chromium" not in install  # autograde needs the sandbox only


def test_without_root_or_sudo_nothing_runs_and_the_command_to_type_is_printed(machine):
    result = machine("test", uid=1000, sudo_ok=False)
    assert result.returncode == 1
    assert "sudo apt-get install -y bubblewrap chromium" in result.stderr
    assert not machine.log.exists(), "apt-get must not be called without the rights to install"


def test_an_install_that_does_not_provide_the_package_is_an_error(machine):
    result = machine("test", uid=0, sudo_ok=None, installs=False)
    assert result.returncode == 1
    assert "still missing: bubblewrap chromium" in result.stderr


def test_nothing_missing_means_nothing_is_called(machine):
    _stub(machine.bin, "bwrap", "true")
    _stub(machine.bin.parent, "chromium", "true")
    result = machine("test", uid=1000, sudo_ok=False)
    assert result.returncode == 0, result.stderr
    assert not machine.log.exists()


def test_an_unknown_target_is_refused_with_the_accepted_ones(machine):
    result = machine("site", uid=0, sudo_ok=None)
    assert result.returncode == 2
    assert "test|autograde" in result.stderr


def test_make_test_and_make_autograde_run_it_before_anything_else():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("test", "autograde"):
        recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
        first = recipe.splitlines()[0].strip()
        assert first == f"bash tools/system_packages.sh {target}", (target, first)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "apt-get" not in ci, ".ci/run must set up nothing that make test does not"

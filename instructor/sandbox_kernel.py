"""Start an IPython kernel for autograding inside a bubblewrap sandbox.

Used as the command of the ``course-sandbox`` kernelspec that instructor/autograde.py (i.e.
``make autograde``) writes at run time:  python sandbox_kernel.py -f CONNECTION_FILE [args...]

What the student's code sees:
- the whole filesystem **read-only**, with the course root, the project that holds the Python
  environment, the instructor's home and /root replaced by empty directories, so ``solutions/``,
  ``.git``, ``submitted/``, ``autograded/`` and ``gradebook.db`` are neither readable nor writable;
  only the Python environment (``sys.prefix`` and ``sys.base_prefix``) is put back, read-only;
- a private, empty, writable working directory (``/tmp/work``) and a private ``/tmp``;
- its own PID, IPC and UTS namespaces (it cannot see or signal other processes);
- when the instructor is root: the kernel runs as ``nobody`` with no capabilities and
  ``no_new_privs``; otherwise it runs as the instructor inside an unprivileged user namespace;
- resource limits: CPU seconds (``COURSE_SANDBOX_CPU_S``, default 600), address space
  (``COURSE_SANDBOX_MEM_MB``, default 8192) and file size (64 MiB).

Simplifications said out loud: the network namespace is shared (the kernel talks to nbgrader over
localhost TCP), so a submission could open network connections; there is no seccomp filter. The
kernel starts in an empty directory, which is fine for this assignment (it reads no data files).

Environment read here (set by instructor/autograde.py): COURSE_SANDBOX_HIDE (os.pathsep-separated
paths to hide), COURSE_SANDBOX_TMP (where per-kernel working directories are created).
"""

from __future__ import annotations

import os
import pwd
import resource
import shutil
import sys
import tempfile
from pathlib import Path

SANDBOX_USER = "nobody"
INSIDE = "/tmp/work"  # where the kernel's private working directory appears inside the sandbox


def _python_paths() -> list[str]:
    """Directories the kernel needs to run Python: the environment and the interpreter it wraps."""
    real = os.path.realpath(sys.executable)
    paths = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(real))}
    return sorted(p for p in paths if os.path.isdir(p))


def bwrap_command(workdir: str, hide: list[str], argv: list[str]) -> list[str]:
    """The bubblewrap command line that runs ``argv`` in the sandbox described above.

    ``workdir`` (outside) appears as ``INSIDE`` in the sandbox; ``argv`` must use that path.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise RuntimeError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
    cmd = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    home = os.path.expanduser("~")
    for path in sorted({os.path.realpath(p) for p in [*hide, home, "/root"] if p and os.path.isdir(p)}):
        if path != "/":
            cmd += ["--tmpfs", path]
    cmd += ["--perms", "1777", "--tmpfs", "/tmp"]
    # put the Python environment back, read-only, after every tmpfs (it may live under /tmp)
    for path in _python_paths():
        parents = [p for p in Path(path).parents if str(p) != "/"]
        for parent in reversed(parents):  # traversable by the sandbox user, even inside a tmpfs
            cmd += ["--perms", "0755", "--dir", str(parent)]
        cmd += ["--ro-bind", path, path]
    cmd += ["--bind", workdir, INSIDE, "--chdir", INSIDE]
    cmd += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
    if os.geteuid() == 0:
        user = pwd.getpwnam(SANDBOX_USER)
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        cmd += [setpriv, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    else:
        cmd += ["--unshare-user", "--cap-drop", "ALL"]
    return cmd + argv


def sandbox_env(workdir: str = INSIDE) -> dict[str, str]:
    """A minimal environment: nothing of the instructor's leaks into the kernel."""
    env = {
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": workdir,
        "IPYTHONDIR": os.path.join(workdir, ".ipython"),
        "MPLCONFIGDIR": os.path.join(workdir, ".matplotlib"),
        "JUPYTER_RUNTIME_DIR": workdir,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "LANG": "C.UTF-8",
    }
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    return env


def set_limits() -> None:
    cpu = int(os.environ.get("COURSE_SANDBOX_CPU_S", "600"))
    mem = int(os.environ.get("COURSE_SANDBOX_MEM_MB", "8192")) * 2**20
    for limit, value in ((resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, mem),
                         (resource.RLIMIT_FSIZE, 64 * 2**20), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(limit, (value, value))


def make_workdir(base: str | None = None) -> str:
    """A fresh private directory for one kernel, under ``base`` or $COURSE_SANDBOX_TMP."""
    workdir = tempfile.mkdtemp(prefix="kernel-", dir=base or os.environ.get("COURSE_SANDBOX_TMP") or None)
    if os.geteuid() == 0:
        user = pwd.getpwnam(SANDBOX_USER)
        os.chown(workdir, user.pw_uid, user.pw_gid)
    os.chmod(workdir, 0o700)
    return workdir


def main(args: list[str]) -> None:
    if "-f" not in args:
        sys.exit("usage: sandbox_kernel.py -f CONNECTION_FILE [kernel args...]")
    i = args.index("-f")
    connection_file, extra = args[i + 1], args[:i] + args[i + 2:]
    workdir = make_workdir()
    inside = os.path.join(workdir, "kernel.json")
    shutil.copyfile(connection_file, inside)
    if os.geteuid() == 0:
        user = pwd.getpwnam(SANDBOX_USER)
        os.chown(inside, user.pw_uid, user.pw_gid)
    os.chmod(inside, 0o600)
    hide = [p for p in os.environ.get("COURSE_SANDBOX_HIDE", "").split(os.pathsep) if p]
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", os.path.join(INSIDE, "kernel.json"), *extra]
    cmd = bwrap_command(workdir, hide, argv)
    set_limits()
    os.execve(cmd[0], cmd, sandbox_env())


if __name__ == "__main__":
    main(sys.argv[1:])

"""Start an IPython kernel for autograding inside a bubblewrap sandbox.

Used as the command of the ``course-sandbox`` kernelspec that instructor/autograde.py (i.e.
``make autograde``) writes at run time:  python sandbox_kernel.py -f CONNECTION_FILE [args...]

What the student's code sees (an allow-list; nothing else of the machine exists in there):
- the Python environment, read-only: the virtualenv (``sys.prefix``) and the interpreter it wraps
  (``sys.base_prefix``; for a system Python only its standard library and executable), with the
  symlinks that lead to them recreated;
- the system libraries, read-only: ``/usr/lib``, ``/usr/lib64`` and the ``/lib`` links, and a few
  files of ``/etc`` the dynamic loader and ``getpwuid`` read (``ETC_FILES``);
- a private, empty, writable working directory (``/tmp/work``), a private ``/tmp``, a minimal
  ``/dev`` and a ``/proc`` of its own PID namespace (it cannot see or signal other processes); its own
  IPC and UTS namespaces;
- when the instructor is root: the kernel runs as ``nobody`` with no capabilities and
  ``no_new_privs``; otherwise it runs as the instructor inside an unprivileged user namespace;
- resource limits: CPU seconds (``COURSE_SANDBOX_CPU_S``, default 600), address space
  (``COURSE_SANDBOX_MEM_MB``, default 8192) and file size (64 MiB).

So the course (``solutions/``, ``.git``, ``submitted/``, ``gradebook.db``), the instructor's home,
and any other copy of the course anywhere on the machine are not there to be read. The course
library is installed in editable mode, so ``import course_lib`` fails in there too (the assignment
asks students not to use it).

Simplifications said out loud: the network namespace is shared (the kernel talks to nbgrader over
localhost TCP), so a submission could open network connections; there is no seccomp filter. The
kernel starts in an empty directory, which is fine for this assignment (it reads no data files).

Environment read here (set by instructor/autograde.py): COURSE_SANDBOX_TMP (where per-kernel working
directories are created, outside the sandbox).
"""

from __future__ import annotations

import os
import pwd
import resource
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

SANDBOX_USER = "nobody"
INSIDE = "/tmp/work"  # where the kernel's private working directory appears inside the sandbox


ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
             "/etc/localtime")
SYSTEM_LIBS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64")


def allowed_paths() -> list[str]:
    """Everything the sandbox shows (read-only), before symlinks are followed."""
    paths = {sys.prefix}
    base = sys.base_prefix
    if os.path.realpath(base) in ("/", "/usr", "/usr/local"):  # a system Python: only its own files
        paths |= {sysconfig.get_paths()["stdlib"], os.path.realpath(sys.executable)}
        libdir, library = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY")
        if libdir and library and os.path.exists(os.path.join(libdir, library)):
            paths.add(os.path.join(libdir, library))
    else:
        paths.add(base)
    paths |= {p for p in (*SYSTEM_LIBS, *ETC_FILES) if os.path.lexists(p)}
    if os.geteuid() == 0:  # the tool that drops to SANDBOX_USER runs inside
        paths.add(os.path.realpath(shutil.which("setpriv") or "/usr/bin/setpriv"))
    return sorted(paths)


def _expose(path: str, cmd: list[str], done: set[str]) -> None:
    """Show ``path`` read-only at the same place, recreating every symlink on the way to it."""
    parts = Path(path).parts
    current = "/"
    for index, part in enumerate(parts[1:], start=1):
        nxt = os.path.join(current, part)
        if os.path.islink(nxt):
            target = os.readlink(nxt)
            if nxt not in done:
                cmd += ["--perms", "0755", "--dir", current, "--symlink", target, nxt]
                done.add(nxt)
            _expose(os.path.normpath(os.path.join(current, target, *parts[index + 1:])), cmd, done)
            return
        current = nxt
    if path not in done and os.path.exists(path):
        for parent in reversed([str(p) for p in Path(path).parents if str(p) != "/"]):
            if parent not in done:  # traversable by the sandbox user
                cmd += ["--perms", "0755", "--dir", parent]
                done.add(parent)
        cmd += ["--ro-bind", path, path]
        done.add(path)


def bwrap_command(workdir: str, argv: list[str]) -> list[str]:
    """The bubblewrap command line that runs ``argv`` in the sandbox described above.

    ``workdir`` (outside) appears as ``INSIDE`` in the sandbox; ``argv`` must use that path.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise RuntimeError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
    cmd = [bwrap, "--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp"]
    done: set[str] = {"/tmp"}
    for path in allowed_paths():
        _expose(path, cmd, done)
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
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", os.path.join(INSIDE, "kernel.json"), *extra]
    cmd = bwrap_command(workdir, argv)
    set_limits()
    os.execve(cmd[0], cmd, sandbox_env())


if __name__ == "__main__":
    main(sys.argv[1:])

"""Start an IPython kernel for autograding inside a bubblewrap sandbox.

Used as the command of the ``course-sandbox`` kernelspec that instructor/autograde.py (i.e.
``make autograde``) writes at run time:  python sandbox_kernel.py -f CONNECTION_FILE [args...]

What the student's code sees (an allow-list; nothing else of the machine exists in there):
- the Python environment, read-only: the virtualenv (``sys.prefix``) and the interpreter it wraps
  (``sys.base_prefix``; for a system Python only its standard library and executable), with the
  symlinks that lead to them recreated;
- the system libraries, read-only: ``/usr/lib``, ``/usr/lib64`` and the ``/lib`` links, and a few
  files of ``/etc`` the dynamic loader and ``getpwuid`` read (``ETC_FILES``);
- a private ``/tmp`` on a tmpfs of ``COURSE_SANDBOX_DISK_MB`` (default 200) holding the kernel's
  working directory ``/tmp/work``: a submission that fills it gets "No space left on device" and the
  host's disk is never written; a minimal ``/dev`` (no writable ``/dev/shm``) and a ``/proc`` of its
  own PID namespace (it cannot see or signal other processes);
- its own network namespace (only a loopback of its own: it cannot reach the host's ports or open
  one the host can reach, and ``/proc/net/tcp`` lists nothing of the host), IPC and UTS namespaces.
  The kernel talks to nbgrader over Unix sockets (ZeroMQ's ``ipc`` transport) in its tmpfs; the
  launcher opens each socket it bound (from ``/proc/PID/root``, one name at a time, following no
  symlink) and the host connects through that descriptor (``/proc/<launcher>/fd/N``, symlinked where
  the connection file says), so it never resolves a path the sandbox made;
- when the instructor is root: the kernel runs under a user id of its own (``sandbox_uid``) with no
  capabilities and ``no_new_privs``; otherwise as the instructor inside an unprivileged user namespace;
- resource limits: CPU seconds (``COURSE_SANDBOX_CPU_S``, default 600), address space per process
  (``COURSE_SANDBOX_MEM_MB``, default 8192), processes and threads (``COURSE_SANDBOX_NPROC``,
  default 64: a fork bomb gets ``BlockingIOError``; counted for this kernel alone: as root under a
  user id of its own, otherwise set inside the kernel's user namespace, where Linux counts it per
  namespace, so other work of the instructor's never uses up the kernel's share) and file size
  (64 MiB). Processes a cell started do not outlive it: after each cell, the grader stops them
  (``stop_strays``), so a fork bomb's children cannot starve the cells after it.
- a kernel that dies while starting (a busy machine) is started again by
  ``nbgrader_hooks.SandboxedExecute``, the reason logged; never a score of the student's.

So the course (``solutions/``, ``.git``, ``submitted/``, ``gradebook.db``), the instructor's home,
and any other copy of the course anywhere on the machine are not there to be read. The course
library is installed in editable mode, so ``import course_lib`` fails in there too (the assignment
asks students not to use it). What one cell may print is capped in bytes by
``SandboxedExecute.max_output_bytes`` (instructor/nbgrader_hooks.py), outside the sandbox.

- a cgroup of its own per kernel (memory of all its processes together, tmpfs included, and their
  number) and a seccomp filter: instructor/sandbox_limits.py. Where cgroups cannot be written the
  per-process limits above are all there is (``make autograde``'s report says so).

Simplifications said out loud: without a cgroup, a kernel's processes together may use up to NPROC
times the per-process memory; as a non-root instructor the kernel's processes also count towards the
instructor's own process limit (``ulimit -u``), which the machine sets. The kernel starts in an
empty directory, which is fine for this assignment (it reads no data files).
"""

from __future__ import annotations

import json
import os
import re
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

try:
    from instructor import sandbox_limits
except ImportError:  # run as the kernelspec's command (a script): this file's folder is on sys.path
    import sandbox_limits

INSIDE = "/tmp/work"  # the kernel's working directory, on the sandbox's size-limited tmpfs
IPC_NAME = ".kernel-ipc"  # the kernel's sockets: INSIDE/.kernel-ipc-PORT
START_FAILED = "the sandboxed kernel could not be started in"  # SandboxedExecute's error; autograde retries
FIRST_UID = 2**30  # per-kernel user ids (root only) are drawn from [2**30, 2**31)
# The kernel starts with SIGCHLD ignored, so the children a cell forks are reaped as soon as they
# end: killed strays leave no zombie counting against the process cap. It then runs what
# ``python -m ipykernel_launcher`` runs, in the same process (one interpreter start, not two), with
# ipykernel's debugger left out: ipykernel imports debugpy (and pydevd, which runs ``uname``) in every
# kernel only to offer Jupyter's visual debugger, which grading never uses. debugpy is hidden just
# while ipykernel's debugger module is imported, so a cell can still import it.
KERNEL_START = ("import signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
                "sys.modules['debugpy'] = None; import ipykernel.debugger; del sys.modules['debugpy']; "
                "del sys.path[0]; from ipykernel import kernelapp; kernelapp.launch_new_instance()")


ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
             "/etc/localtime")
SYSTEM_LIBS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64")


def allowed_paths() -> list[str]:
    """Everything the sandbox shows (read-only), before symlinks are followed."""
    base = sys.base_prefix
    if os.path.realpath(sys.prefix) in ("/", "/usr", "/usr/local"):  # a system Python: only its own files
        paths = {sysconfig.get_paths()["stdlib"], sys.executable, os.path.realpath(sys.executable)}
        libdir, library = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY")
        if libdir and library and os.path.exists(os.path.join(libdir, library)):
            paths.add(os.path.join(libdir, library))
    else:
        paths = {sys.prefix, base}
    paths |= {p for p in (*SYSTEM_LIBS, *ETC_FILES) if os.path.lexists(p)}
    # the tool that runs inside before the kernel: root drops to the kernel's own user id (setpriv),
    # anyone else caps processes inside the user namespace (prlimit)
    paths.add(os.path.realpath(_tool("setpriv" if os.geteuid() == 0 else "prlimit")))
    # a path inside another one is shown with it (a system Python's libpython under /usr/lib)
    return sorted(p for p in paths if not any(p.startswith(q.rstrip("/") + "/") for q in paths))


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


def _tool(name: str) -> str:
    """util-linux's ``setpriv`` or ``prlimit`` (both in every Debian and Ubuntu: util-linux is essential)."""
    return shutil.which(name) or f"/usr/bin/{name}"


def sandbox_uid() -> int:
    """A user id of its own for one kernel (root only): RLIMIT_NPROC counts the processes of a
    user, so with a fresh id the cap counts this kernel's processes and no other kernel's."""
    return FIRST_UID + secrets.randbelow(2**30)


def bwrap_command(argv: list[str], files: dict[str, int] | None = None, info_fd: int | None = None,
                  uid: int | None = None, seccomp_fd: int | None = None) -> list[str]:
    """The bubblewrap command line that runs ``argv`` in the sandbox described above.

    ``files`` ({path inside: readable file descriptor}) are copied into the sandbox, read-only;
    ``info_fd`` receives bubblewrap's JSON (the sandboxed process's pid); ``uid`` (root only) is
    the user the command runs as (default: ``sandbox_uid()``); ``seccomp_fd`` holds the seccomp
    filter (sandbox_limits.seccomp_fd). ``popen`` passes the descriptors and the limits too.
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise RuntimeError("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
    disk = int(os.environ.get("COURSE_SANDBOX_DISK_MB", "200")) * 2**20
    cmd = [bwrap, "--dev", "/dev", "--proc", "/proc",
           "--size", str(disk), "--perms", "1777", "--tmpfs", "/tmp", "--perms", "1777", "--dir", INSIDE]
    done: set[str] = {"/tmp", INSIDE}
    for path in allowed_paths():
        _expose(path, cmd, done)
    for inside, fd in (files or {}).items():
        cmd += ["--perms", "0444", "--file", str(fd), inside]
    cmd += ["--chdir", INSIDE, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
    if info_fd is not None:
        cmd += ["--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    if os.geteuid() == 0:
        uid = sandbox_uid() if uid is None else uid
        cmd += [_tool("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    else:
        # RLIMIT_NPROC is counted per user namespace and user id (Linux >= 5.14), and at each level up
        # against the limit its creator had: set inside, it counts this kernel's processes alone, while
        # bubblewrap creates the namespace under the instructor's own limit. (Set before bubblewrap,
        # it would count every process of the instructor, started by anything, anywhere.)
        nproc = sandbox_limits.nproc_limit()
        cmd += ["--unshare-user", "--cap-drop", "ALL", _tool("prlimit"), f"--nproc={nproc}:{nproc}", "--"]
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
    """Limits for the sandbox's processes (called in the child before bubblewrap starts)."""
    cpu = int(os.environ.get("COURSE_SANDBOX_CPU_S", "600"))
    mem = int(os.environ.get("COURSE_SANDBOX_MEM_MB", "8192")) * 2**20
    limits = [(resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, mem), (resource.RLIMIT_FSIZE, 64 * 2**20),
              (resource.RLIMIT_CORE, 0)]
    if os.geteuid() == 0:  # counted for the kernel's own user id (sandbox_uid); else set inside (bwrap_command)
        limits.append((resource.RLIMIT_NPROC, sandbox_limits.nproc_limit()))
    for limit, value in limits:
        resource.setrlimit(limit, (value, value))


def popen(argv: list[str], files: dict[str, int] | None = None, info_fd: int | None = None,
          cgroup: sandbox_limits.KernelCgroup | None = None, seccomp: bool = True, **kwargs) -> subprocess.Popen:
    """Start ``argv`` in the sandbox: bubblewrap's line, the minimal environment, the per-process
    limits, the seccomp filter (unless ``seccomp=False``) and, if given, the kernel's ``cgroup``."""
    filter_fd = sandbox_limits.seccomp_fd() if seccomp else None
    cmd = bwrap_command(argv, files=files, info_fd=info_fd, seccomp_fd=filter_fd)
    fds = {*(files or {}).values(), info_fd, filter_fd} - {None}

    def enter() -> None:
        if cgroup is not None:
            cgroup.join()
        set_limits()

    try:
        return subprocess.Popen(cmd, env=sandbox_env(), pass_fds=tuple(fds), preexec_fn=enter, **kwargs)  # noqa: PLW1509
    finally:
        if filter_fd is not None:
            os.close(filter_fd)


def run(argv: list[str], timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """``popen`` to the end, output captured as text (the probe and the tests)."""
    proc = popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _processes() -> dict[int, tuple[int, int]]:
    """{pid: (parent pid, start time)} of every process on the machine (from /proc)."""
    table = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:  # plain descriptors, not pathlib: this runs after every cell, over every process
            fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
            try:
                fields = os.read(fd, 4096).rsplit(b")", 1)[1].split()
            finally:
                os.close(fd)
        except (OSError, IndexError):
            continue
        table[int(pid)] = (int(fields[1]), int(fields[19]))
    return table


def stray_processes(launcher_pid: int) -> list[int]:
    """Processes a kernel's cells started, in the sandbox whose launcher (this file's ``main``) has
    ``launcher_pid``: everything under the sandbox's init except the kernel (init's oldest child).

    The chain is launcher -> bubblewrap -> init (bubblewrap, pid 1 inside) -> kernel; a process a
    cell forks hangs under the kernel, or under init once orphaned.
    """
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    chain = [launcher_pid]
    for _ in range(2):  # bubblewrap, then init
        below = children.get(chain[-1], [])
        if len(below) != 1:
            return []
        chain.append(below[0])
    init = chain[-1]
    below_init = sorted(children.get(init, []), key=lambda pid: table[pid][1])
    if not below_init:
        return []
    kernel, stray, todo = below_init[0], [], [*below_init[1:], *children.get(below_init[0], [])]
    while todo:
        pid = todo.pop()
        if pid != kernel:
            stray.append(pid)
            todo += children.get(pid, [])
    return stray


def stop_strays(launcher_pid: int) -> int:
    """Kill the processes a kernel's cells left running (a fork bomb's children); how many."""
    stray = stray_processes(launcher_pid)
    for pid in stray:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    return len(stray)


def _child_pid(info_fd: int) -> int:
    """The sandboxed process's pid, from bubblewrap's ``--info-fd`` JSON."""
    data = b""
    while (match := re.search(rb'"child-pid":\s*(\d+)\s*[,}\n]', data)) is None:
        chunk = os.read(info_fd, 4096)
        if not chunk:
            raise RuntimeError(f"bubblewrap did not start: {data[-300:]!r}")
        data += chunk
    return int(match.group(1))


def main(args: list[str]) -> None:
    if "-f" not in args:
        sys.exit("usage: sandbox_kernel.py -f CONNECTION_FILE [kernel args...]")
    i = args.index("-f")
    connection_file, extra = args[i + 1], args[:i] + args[i + 2:]
    info = json.loads(Path(connection_file).read_text())
    if info.get("transport") != "ipc":
        sys.exit("the sandbox has no network: its kernel must use transport 'ipc' (SandboxedExecute sets it)")
    outside, info["ip"] = info["ip"], os.path.join(INSIDE, IPC_NAME)
    kernel_r, kernel_w = os.pipe()
    os.write(kernel_w, json.dumps(info).encode())
    os.close(kernel_w)
    info_r, info_w = os.pipe()
    kernel_json = os.path.join(INSIDE, "kernel.json")
    # the input history in memory, as nbclient asks of a python3 kernel (this kernelspec has another
    # name): no SQLite file and no thread writing it in each kernel
    argv = [sys.executable, "-c", KERNEL_START, "-f", kernel_json, "--HistoryManager.hist_file=:memory:", *extra]
    # a terminate (how the grader stops a kernel: nbgrader_hooks.stop_kernel) still removes the cgroup;
    # one that comes while the cgroup is being made waits until it can
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    cgroup = _kernel_cgroup(outside)
    status = 1
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        proc = popen(argv, files={kernel_json: kernel_r}, info_fd=info_w, cgroup=cgroup)
        os.close(info_w)
        os.close(kernel_r)
        ports = [info[key] for key in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")]
        for port, fd in _kernel_sockets(_child_pid(info_r), ports, proc).items():
            # the client connects where the connection file says: to this launcher's descriptor of the
            # socket the kernel bound, never to a path the sandbox could have replaced since
            link = f"{outside}-{port}"
            if os.path.lexists(link):
                os.unlink(link)
            os.symlink(f"/proc/{os.getpid()}/fd/{fd}", link)
        status = proc.wait()
    finally:
        if cgroup is not None:  # what happened is recorded before the cgroup goes (the hook reads it)
            sandbox_limits.write_record(outside, {**cgroup.describe(), "oom_kills": cgroup.oom_kills()})
            cgroup.remove()
    sys.exit(status)


def _kernel_sockets(child: int, ports: list[int], proc: subprocess.Popen, wait_s: float = 120.0) -> dict[int, int]:
    """{port: descriptor} of the kernel's Unix sockets in the sandbox, once it has bound them all.

    Each is opened (``O_PATH``) from the sandbox's root, one name at a time and never following a
    symlink, and must be a socket: the host never resolves a path the sandbox made (a symlink there
    would otherwise be followed in the host's file system). Through ``/proc/<launcher>/fd/N`` the
    client reaches exactly that socket, whatever the sandbox renames or replaces later. Gives up
    (returning what it has) when the kernel exits or after ``wait_s``."""
    flags = os.O_PATH | os.O_NOFOLLOW
    found: dict[int, int] = {}
    deadline = time.monotonic() + wait_s
    while len(found) < len(ports) and proc.poll() is None and time.monotonic() < deadline:
        # opened afresh each time: right after bubblewrap reports its child, that child may not
        # have entered the sandbox's root yet
        root = os.open(f"/proc/{child}/root", os.O_PATH | os.O_DIRECTORY)  # the kernel's own link: trusted
        try:
            for port in ports:
                if port in found:
                    continue
                fds = [root]
                try:
                    for name in [*Path(INSIDE).parts[1:], f"{IPC_NAME}-{port}"]:
                        is_dir = len(fds) < len(Path(INSIDE).parts)
                        fds.append(os.open(name, flags | (os.O_DIRECTORY if is_dir else 0), dir_fd=fds[-1]))
                    if stat.S_ISSOCK(os.fstat(fds[-1]).st_mode):
                        found[port] = fds.pop()
                except OSError:
                    pass
                finally:
                    for fd in fds[1:]:
                        os.close(fd)
        finally:
            os.close(root)
        if len(found) < len(ports):
            time.sleep(0.02)
    return found


def _kernel_cgroup(outside: str) -> sandbox_limits.KernelCgroup | None:
    """This kernel's cgroup (sandbox_limits), described next to its sockets; None where cgroups
    cannot be used (the per-process limits remain; ``make autograde``'s probe reports it)."""
    sandbox_limits.remove_stale()
    try:
        cgroup = sandbox_limits.KernelCgroup.create(f"{sandbox_limits.PREFIX}{os.getpid()}")
    except sandbox_limits.CgroupUnavailable:
        return None
    sandbox_limits.write_record(outside, cgroup.describe())
    return cgroup


if __name__ == "__main__":
    main(sys.argv[1:])

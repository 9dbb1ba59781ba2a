"""The grading sandbox itself (instructor/sandbox_kernel.py), without nbgrader: a kernel started the
way `make autograde` starts it, and plain commands under the same bubblewrap line and limits.

Each limit is tested by breaking it: a port opened inside and one on the host, a disk filled, a
fork bomb, and the processes a cell leaves behind. tests/test_assignment.py runs the same attacks
through the whole grading pipeline. bubblewrap is required (as in CI): without it these tests fail.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from instructor import sandbox_kernel, sandbox_limits  # noqa: E402

pytestmark = pytest.mark.slow


def _sandboxed(code: str, env: dict[str, str] | None = None, timeout: int = 300,
               **kwargs) -> subprocess.CompletedProcess:
    """``python -c code`` in the sandbox, with the kernel's limits and seccomp filter (``sandbox_kernel.run``;
    ``kwargs``: its ``cgroup`` or ``seccomp=False``)."""
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        return sandbox_kernel.run([sys.executable, "-c", code], timeout=timeout, **kwargs)
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _last_json(out: subprocess.CompletedProcess):
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_network_is_its_own():
    """The host's listening port is neither listed in /proc/net/tcp nor reachable, and a port the
    sandbox opens is not one the host can connect to."""
    host = socket.socket()
    host.bind(("127.0.0.1", 0))
    host.listen()
    port = host.getsockname()[1]
    code = f'''
import json, socket, time
tcp = open("/proc/net/tcp").read()
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    reached = True
except OSError:
    reached = False
server = socket.socket()
server.bind(("0.0.0.0", 0))
server.listen()
print(json.dumps({{"listed": ":%04X " % {port} in tcp, "lines": tcp.count("\\n"), "reached": reached,
                   "own": server.getsockname()[1]}}), flush=True)
time.sleep(5)
'''
    proc = sandbox_kernel.popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        seen = json.loads(proc.stdout.readline())
        assert seen["listed"] is False and seen["lines"] == 1 and seen["reached"] is False, seen
        with pytest.raises(OSError):  # while the sandbox listens on its port, the host cannot reach it
            socket.create_connection(("127.0.0.1", seen["own"]), timeout=2).close()
        assert f":{port:04X} " in open("/proc/net/tcp").read()  # the host's own view does list it
    finally:
        proc.kill()
        proc.wait()
        host.close()


def test_a_full_disk_stops_at_the_tmpfs_cap():
    code = '''
import errno, json, os
written, error = 0, None
try:
    for i in range(100):
        with open(f"fill{i}.bin", "wb") as f:
            for _ in range(16):
                f.write(b"x" * 2**20)
                written += 2**20
except OSError as err:
    error = errno.errorcode.get(err.errno)
print(json.dumps([written, error, os.getcwd()]))
'''
    written, error, cwd = _last_json(_sandboxed(code, {"COURSE_SANDBOX_DISK_MB": "40"}))
    assert error == "ENOSPC" and 30 * 2**20 <= written <= 40 * 2**20 and cwd == sandbox_kernel.INSIDE


def fork_bomb(most: int) -> str:
    """Code that forks up to ``most`` sleeping children and prints how many it made and the error that stopped it."""
    return f'''
import json, os, time
children = 0
try:
    while children < {most}:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError as err:
    print(json.dumps([children, type(err).__name__]), flush=True)
    os._exit(0)
'''


def test_a_fork_bomb_stops_at_the_process_cap():
    code = fork_bomb(5000)
    children, error = _last_json(_sandboxed(code, {"COURSE_SANDBOX_NPROC": "20"}))
    assert error == "BlockingIOError" and 0 < children < 20


UNDER_LOAD = '''
import json, subprocess, sys
sys.path.insert(0, sys.argv[1])
from instructor import sandbox_kernel
# the same user's other work: 300 threads, started after the sandboxed process
load = subprocess.Popen([sys.executable, "-c", "import threading, time; time.sleep(1); ev = threading.Event(); "
                         "[threading.Thread(target=ev.wait).start() for _ in range(300)]; print('up', flush=True); "
                         "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
code = """
import json, threading, time
time.sleep(3)
ev, started = threading.Event(), 0
try:
    while started < 200:
        threading.Thread(target=ev.wait).start()
        started += 1
except RuntimeError:
    pass
ev.set()
print(json.dumps(started))
"""
out = sandbox_kernel.run([sys.executable, "-c", code], timeout=60)
print(json.dumps([load.stdout.readline().strip(), out.returncode, out.stdout.strip(), out.stderr[-500:]]))
load.kill()
'''


def test_the_process_cap_counts_the_kernels_threads_not_the_instructors_other_work():
    """As an instructor who is not root (the kernel in a user namespace under the instructor's own user
    id), 300 threads the same user starts elsewhere after the kernel started cost the kernel nothing:
    it still starts as many threads as the cap allows, and the cap still stops it there. (With the cap
    set before bubblewrap, RLIMIT_NPROC counted every process of the user: on a busy machine the kernel
    could not start zmq's threads, "Resource temporarily unavailable", and died before it answered.)"""
    python, nobody = "/usr/bin/python3", 65534
    if os.geteuid() != 0 or not os.path.exists(python):
        pytest.skip("needs root (to run as another user) and a system Python that user can run")
    folder = Path(tempfile.mkdtemp(prefix="sandbox-nproc-"))
    try:
        os.chmod(folder, 0o755)
        shutil.copytree(ROOT / "instructor", folder / "instructor")
        for path in folder.rglob("*"):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        env = {"PATH": os.environ["PATH"], "HOME": str(folder), "COURSE_SANDBOX_NPROC": "40"}
        out = subprocess.run(["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups", python, "-c",
                              UNDER_LOAD, str(folder)], env=env, capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert out.returncode == 0, out.stderr[-2000:]
    load, status, started, stderr = json.loads(out.stdout.strip().splitlines()[-1])
    if status != 0 and "bwrap:" in stderr and "namespace" in stderr:
        pytest.skip(f"unprivileged user namespaces are not available here: {stderr}")
    assert load == "up" and status == 0, stderr
    assert 30 <= int(started) < 40, started  # the cap: 40 with the process itself and bubblewrap's init


def test_a_kernel_over_unix_sockets_and_its_cells_leave_no_process_behind(tmp_path, monkeypatch):
    """The kernel as `make autograde` starts it (ipc transport, the launcher in between); after a
    cell forks, ``stop_strays`` finds exactly the processes it left and stops them."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpec

    km = KernelManager(transport="ipc", ip=str(tmp_path / "kernel"))
    km._kernel_spec = KernelSpec(argv=[sys.executable, sandbox_kernel.__file__, "-f", "{connection_file}"],
                                 display_name="sandbox", language="python", interrupt_mode="message")
    outputs: list = []
    km.start_kernel()
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        code = ("import os, time\nkids = [os.fork() for _ in range(3)]\n"
                "if 0 in kids:\n    time.sleep(600)\n    os._exit(0)\nprint(os.getcwd(), os.getuid())")
        reply = client.execute_interactive(code, timeout=60, output_hook=lambda msg: outputs.append(msg))
        assert reply["content"]["status"] == "ok"
        launcher = km.provisioner.process.pid
        stray = sandbox_kernel.stray_processes(launcher)
        assert len(stray) >= 3, stray  # 3 forks, each fork after the first forks again: 7 in all
        assert sandbox_kernel.stop_strays(launcher) == len(stray)
        time.sleep(1)
        assert sandbox_kernel.stray_processes(launcher) == []
        assert client.execute_interactive("1 + 1", timeout=60)["content"]["status"] == "ok"  # the kernel lives
        # the host reaches each socket through the launcher's descriptor, never through a path inside
        # the sandbox: sockets replaced by symlinks to the host's files change nothing
        ports = (km.shell_port, km.iopub_port, km.stdin_port, km.control_port, km.hb_port)
        assert {os.readlink(f"{km.ip}-{p}").rsplit("/", 1)[0] for p in ports} == {f"/proc/{launcher}/fd"}
        swap = ("import glob, os\nfor p in glob.glob('/tmp/work/.kernel-ipc-*'):\n"
                "    os.unlink(p)\n    os.symlink('/etc/passwd', p)\nprint(len(glob.glob('/tmp/work/.kernel-ipc-*')))")
        assert client.execute_interactive(swap, timeout=60)["content"]["status"] == "ok"
        for p in ports:
            assert stat.S_ISSOCK(os.stat(f"{km.ip}-{p}").st_mode), p  # still the kernel's socket
        cgroup = sandbox_limits.read_record(km.ip)  # its cgroup holds the kernel, where cgroups work here
        if sandbox_limits.cgroup_support()[0]:
            assert cgroup and all(os.path.isdir(d) for d in cgroup["dirs"]), cgroup
            inside = sandbox_limits.KernelCgroup.from_description(cgroup).processes()
            assert launcher not in inside and len(inside) >= 3, inside  # bubblewrap, its init, the kernel
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=False)  # a shutdown request: the launcher removes the cgroup
    if cgroup:
        after = sandbox_limits.read_record(km.ip)
        assert after["oom_kills"] == 0 and not any(os.path.exists(d) for d in after["dirs"]), after
    printed = "".join(m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream")
    cwd, uid = printed.split()
    assert cwd == sandbox_kernel.INSIDE and (os.geteuid() != 0 or int(uid) >= sandbox_kernel.FIRST_UID)



# ------------------------------------------------------------------ a cgroup per kernel (sandbox_limits)

def _cgroup(tag: str, **limits) -> sandbox_limits.KernelCgroup:
    try:
        return sandbox_limits.KernelCgroup.create(f"{sandbox_limits.PREFIX}test-{os.getpid()}-{tag}", **limits)
    except sandbox_limits.CgroupUnavailable as err:  # the fallback is tested below
        pytest.skip(f"cgroups cannot be used here: {err}")


MEMORY_HOG = '''
import json, os, time
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        block = b"x" * (MB * 2**20)  # written, so it counts
        time.sleep(3)
        os._exit(0)
    kids.append(pid)
ends = [os.waitpid(pid, 0)[1] for pid in kids]
print(json.dumps([os.WTERMSIG(s) if os.WIFSIGNALED(s) else -os.WEXITSTATUS(s) for s in ends]))
'''


def test_a_kernels_processes_share_one_memory_cap_and_the_next_kernel_starts_clean():
    """Four children of 120 MB each, every one under the 256 MB per-process limit, are 480 MB
    together: over the 300 MB cap of their cgroup, the OOM killer stops at least one. The next
    cgroup, whose children stay under the cap, loses nothing; both are removed afterwards."""
    limits = {"COURSE_SANDBOX_MEM_MB": "256"}
    first = _cgroup("hog", memory_mb=300)
    try:
        ends = _last_json(_sandboxed(MEMORY_HOG.replace("MB", "120"), limits, cgroup=first))
        assert ends.count(9) >= 1 and first.oom_kills() >= 1, (ends, first.oom_kills())
    finally:
        first.remove()
    assert not any(os.path.exists(d) for d in first.dirs)
    second = _cgroup("next", memory_mb=300)
    try:
        ends = _last_json(_sandboxed(MEMORY_HOG.replace("MB", "40"), limits, cgroup=second))
        assert ends == [0, 0, 0, 0] and second.oom_kills() == 0, ends
    finally:
        second.remove()
    alone = _last_json(_sandboxed(MEMORY_HOG.replace("MB", "120"), limits))  # no cgroup: nothing stops them
    assert alone == [0, 0, 0, 0], alone


def test_the_cgroup_caps_processes_even_when_the_per_process_limit_would_not():
    code = fork_bomb(500)
    group = _cgroup("pids", pids=20)
    try:
        children, error = _last_json(_sandboxed(code, {"COURSE_SANDBOX_NPROC": "1000"}, cgroup=group))
    finally:
        group.remove()
    assert error == "BlockingIOError" and 0 < children < 20


def test_without_writable_cgroups_the_sandbox_says_it_falls_back_to_per_process_limits(tmp_path):
    usable, line = sandbox_limits.cgroup_support(root=str(tmp_path))  # no cgroup file system there
    assert not usable and "memory capped per process only" in line and "cgroup v1: no memory" in line, line
    assert "cgroup v2: not mounted" in line, line
    (tmp_path / "cgroup.controllers").write_text("cpu io\n")  # cgroup v2 without memory and pids delegated
    with pytest.raises(sandbox_limits.CgroupUnavailable, match=r"not delegated .*\(it has: cpu io\)"):
        sandbox_limits.KernelCgroup.create("course-kernel-x", root=str(tmp_path))
    assert not (tmp_path / "course-kernel-x").exists()


# ------------------------------------------------------------------ the seccomp filter (sandbox_limits)

def _filter(program: bytes, arch: int, nr: int, arg0: int = 0) -> int:
    """What the kernel would do with one system call: a classic-BPF interpreter for the opcodes the
    filter uses, over a struct seccomp_data."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    ops = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        if code == 0x06:
            return k
        if code == 0x20:
            acc, pc = struct.unpack_from("=I", data, k)[0], pc + 1
            continue
        taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
        pc += 1 + (jt if taken else jf)


def _header_numbers(path: str, prefixes: tuple[str, ...]) -> dict[str, int]:
    text = Path(path).read_text()
    return {m.group(2): int(m.group(3)) for m in re.finditer(r"#define "
                                                             rf"__NR({'|'.join(prefixes)})_?(\w+)\s+(\d+)\b", text)}


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_refuses_the_deny_list_and_allows_the_rest(machine):
    program, line = sandbox_limits.seccomp_program(machine)
    arch, column = sandbox_limits.AUDIT_ARCH[machine], ["x86_64", "aarch64"].index(machine)
    eperm, allow = 0x50000 | errno.EPERM, 0x7FFF0000
    assert machine in line and program is not None
    for name, numbers in sandbox_limits.DENIED.items():
        assert _filter(program, arch, numbers[column]) == eperm, name
    # read, write, mmap, openat, exit_group, futex
    ordinary = {"x86_64": [0, 1, 9, 257, 231, 202], "aarch64": [63, 64, 222, 56, 94, 98]}[machine]
    assert all(_filter(program, arch, nr) == allow for nr in ordinary)
    clone = sandbox_limits.CLONE[machine]
    assert _filter(program, arch, clone, 0x11) == allow  # fork: SIGCHLD as the exit signal
    assert _filter(program, arch, clone, 0x003D0F00) == allow  # a thread (CLONE_VM | CLONE_THREAD | ...)
    assert _filter(program, arch, clone, 0x10000011) == eperm  # into a new user namespace
    assert _filter(program, arch, 435) == 0x50000 | errno.ENOSYS  # clone3: the C library falls back to clone
    assert _filter(program, 0x40000003, 101) == 0x80000000  # another architecture's calling convention (i386)
    if machine == "x86_64":
        assert _filter(program, arch, 0x40000000 | 101) == 0x80000000  # x32
    # the numbers are the kernel's, where this machine has its headers
    header = {"x86_64": ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h", ("",)),
              "aarch64": ("/usr/include/asm-generic/unistd.h", ("", "3264"))}[machine]
    if os.path.exists(header[0]):
        known = _header_numbers(*header)
        table = {**{n: v[column] for n, v in sandbox_limits.DENIED.items()}, "clone": clone, "clone3": 435}
        assert {n: known.get(n) for n in table} == table


def test_an_unknown_architecture_gets_no_filter_and_says_so():
    program, line = sandbox_limits.seccomp_program("riscv64")
    assert program is None and "no seccomp filter" in line and "'riscv64' is not supported" in line


SYSCALLS = '''
import ctypes, errno, json, os, subprocess, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    result = getattr(libc, name)(*args)
    return [result, errno.errorcode.get(ctypes.get_errno()) if result == -1 else None]
out = {"ptrace": call("ptrace", 0, 0, None, None),  # PTRACE_TRACEME
       "unshare": call("unshare", 0x10000000),  # CLONE_NEWUSER
       "personality": call("personality", ctypes.c_uint(0xFFFFFFFF))}
clone = call("syscall", *map(ctypes.c_long, (CLONE, 0x10000000 | 17, 0, 0, 0, 0)))
if clone[0] == 0:
    os._exit(0)
out["clone_newuser"] = clone
thread = threading.Thread(target=lambda: None)
thread.start()
thread.join()
pid = os.fork()
if pid == 0:
    os._exit(7)
out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
out["subprocess"] = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True,
                                   text=True).stdout.strip()
print(json.dumps(out))
'''


def test_the_filter_in_the_sandbox_refuses_ptrace_and_namespaces_and_python_still_works():
    machine = os.uname().machine
    if sandbox_limits.seccomp_program()[0] is None:
        pytest.skip(f"no seccomp filter for {machine}")
    code = SYSCALLS.replace("CLONE", str(sandbox_limits.CLONE[machine]))
    seen = _last_json(_sandboxed(code))
    assert seen["ptrace"] == seen["unshare"] == seen["personality"] == seen["clone_newuser"] == [-1, "EPERM"], seen
    assert seen["fork"] == 7 and seen["subprocess"] == "42", seen
    # what the filter takes away (only these two calls: once traced, the process is no use for more)
    control = code.split("clone = ")[0] + "print(json.dumps(out))\n"
    unfiltered = _last_json(_sandboxed(control, seccomp=False))
    assert unfiltered["ptrace"] == [0, None] and unfiltered["personality"][1] is None, unfiltered


FLAKY_LAUNCHER = '''
import os, sys
marker = os.environ["FLAKY_MARKER"]
starts = int(open(marker).read()) if os.path.exists(marker) else 0
open(marker, "w").write(str(starts + 1))
if starts < int(os.environ["FLAKY_DEATHS"]):  # what zmq does when it cannot start a thread
    sys.stderr.write("Resource temporarily unavailable (src/thread.cpp:241)\\n")
    os.abort()
os.execv(sys.executable, [sys.executable, os.environ["FLAKY_SANDBOX"], *sys.argv[1:]])
'''


@pytest.mark.parametrize("deaths", [1, 2])
def test_a_kernel_that_dies_while_starting_is_started_again_with_the_reason_logged(tmp_path, monkeypatch, caplog,
                                                                                   deaths):
    """The sandboxed kernel, behind a launcher that dies the way a kernel did on a busy machine: the
    notebook still runs when a later try starts it; when every try dies, the error says it was the
    machine (``make autograde`` then grades the student again instead of scoring anything)."""
    import logging

    import nbformat

    from instructor.nbgrader_hooks import STATE, SandboxedExecute

    spec = tmp_path / "kernels" / "flaky"
    spec.mkdir(parents=True)
    (tmp_path / "flaky.py").write_text(FLAKY_LAUNCHER)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, str(tmp_path / "flaky.py"), "-f", "{connection_file}"],
        "display_name": "flaky", "language": "python", "interrupt_mode": "message"}))
    ipc = tmp_path / "ipc"
    ipc.mkdir()
    for key, value in {"JUPYTER_PATH": str(tmp_path), "COURSE_SANDBOX_KERNEL": "flaky", "COURSE_SANDBOX_TMP": str(ipc),
                       "FLAKY_MARKER": str(tmp_path / "starts"), "FLAKY_DEATHS": str(deaths),
                       "FLAKY_SANDBOX": sandbox_kernel.__file__}.items():
        monkeypatch.setenv(key, value)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    execute = SandboxedExecute(kernel_start_tries=2)
    execute.log = logging.getLogger("flaky-kernel-test")
    resources = {"nbgrader": {"student": "s"}, STATE: {}}
    with caplog.at_level(logging.WARNING, logger="flaky-kernel-test"):
        if deaths < 2:
            nb, _ = execute.preprocess(nb, resources)
            assert nb.cells[0].outputs[0]["text"] == "42\n"
        else:
            with pytest.raises(RuntimeError, match=sandbox_kernel.START_FAILED + " 2 tries"):
                execute.preprocess(nb, resources)
    assert "the sandboxed kernel did not start (try 1 of 2" in caplog.text, caplog.text
    assert (tmp_path / "starts").read_text() == str(min(deaths + 1, 2))


def test_the_next_notebooks_kernel_starts_ahead_fresh_and_every_kernel_is_stopped_with_its_cgroup(tmp_path,
                                                                                                  monkeypatch):
    """With ``$COURSE_NOTEBOOKS`` (``make autograde`` sets it), the first kernel starts as nbgrader
    begins and each notebook's kernel starts the next one's while it runs: the next notebook runs in
    that kernel (a process of its own, which never saw the previous notebook's code), and
    ``stop_kernel`` stops each one through its launcher,
    which records it and removes its cgroup. A kernel started ahead that no notebook used is stopped
    by ``discard_spare``; nothing of any of them is left running."""
    import logging

    import nbformat

    from instructor.nbgrader_hooks import STATE, SandboxedExecute

    spec = tmp_path / "kernels" / "sandboxed"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, sandbox_kernel.__file__, "-f", "{connection_file}"],
        "display_name": "sandboxed", "language": "python", "interrupt_mode": "message"}))
    ipc = tmp_path / "ipc"
    ipc.mkdir()
    for key, value in {"JUPYTER_PATH": str(tmp_path), "COURSE_SANDBOX_KERNEL": "sandboxed",
                       "COURSE_SANDBOX_TMP": str(ipc), "COURSE_NOTEBOOKS": "3"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(SandboxedExecute, "_spare", None)
    launchers = []

    def started_ahead() -> None:
        km, spare_ipc = SandboxedExecute._spare  # the next notebook's, already started
        launchers.append((km.provisioner.process, spare_ipc))
        assert launchers[-1][0].poll() is None

    def run(source: str) -> str:
        execute = SandboxedExecute()  # nbgrader makes one per notebook
        execute.log = logging.getLogger("kernel-ahead-test")
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
        nb, _ = execute.preprocess(nb, {"nbgrader": {"student": "ahead"}, STATE: {}})
        started_ahead()
        return nb.cells[0].outputs[0]["text"]

    SandboxedExecute.start_first()  # as nbgrader autograde begins (run_nbgrader's zygote)
    started_ahead()
    assert run("secret = 42\nprint('first')") == "first\n"
    assert run("print('secret' in dir())") == "False\n"  # a fresh kernel: the one started ahead
    SandboxedExecute.discard_spare()  # the third notebook never came
    assert SandboxedExecute._spare is None
    if sandbox_limits.cgroup_support()[0]:  # notebooks 1 and 2 ran in the kernels started ahead, and their
        for _, spare_ipc in launchers[:2]:  # launchers stopped them, recorded them, removed their cgroups
            record = sandbox_limits.read_record(spare_ipc)
            assert record["oom_kills"] == 0 and not any(os.path.exists(d) for d in record["dirs"]), record
    for process, _ in launchers:  # notebook 3's (never used) too, however far it had got
        assert process.poll() is not None
    mine = {f"{sandbox_limits.PREFIX}{process.pid}" for process, _ in launchers}
    assert not [d for dirs in sandbox_limits._sibling_dirs(sandbox_limits.CGROUP_ROOT) for d in dirs
                if os.path.basename(d) in mine]
    assert not [p for p in Path("/proc").glob("[0-9]*/cmdline")
                if str(ipc) in p.read_text(errors="replace")], "a launcher of this test is still running"

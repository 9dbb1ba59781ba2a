"""The grading sandbox itself (instructor/sandbox_kernel.py), without nbgrader: a kernel started the
way `make autograde` starts it, and plain commands under the same bubblewrap line and limits.

Each limit is tested by breaking it: a port opened inside and one on the host, a disk filled, a
fork bomb, and the processes a cell leaves behind. tests/test_assignment.py runs the same attacks
through the whole grading pipeline. bubblewrap is required (as in CI): without it these tests fail.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from conftest import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from instructor import sandbox_kernel  # noqa: E402

pytestmark = pytest.mark.slow


def _sandboxed(code: str, env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python -c code`` in the sandbox, with the kernel's limits (``set_limits``)."""
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        return subprocess.run(sandbox_kernel.bwrap_command([sys.executable, "-c", code]),
                              env=sandbox_kernel.sandbox_env(), capture_output=True, text=True, timeout=timeout,
                              preexec_fn=sandbox_kernel.set_limits)  # noqa: PLW1509
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
    proc = subprocess.Popen(sandbox_kernel.bwrap_command([sys.executable, "-c", code]), env=sandbox_kernel.sandbox_env(),
                            stdout=subprocess.PIPE, text=True)
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


def test_a_fork_bomb_stops_at_the_process_cap():
    code = '''
import json, os, time
children = 0
try:
    while children < 5000:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError as err:
    print(json.dumps([children, type(err).__name__]), flush=True)
    os._exit(0)
'''
    children, error = _last_json(_sandboxed(code, {"COURSE_SANDBOX_NPROC": "20"}))
    assert error == "BlockingIOError" and 0 < children < 20


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
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)
    printed = "".join(m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream")
    cwd, uid = printed.split()
    assert cwd == sandbox_kernel.INSIDE and (os.geteuid() != 0 or int(uid) >= sandbox_kernel.FIRST_UID)


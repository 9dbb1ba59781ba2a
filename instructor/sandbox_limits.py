"""Two limits of the grading sandbox that the kernel cannot see from inside: a cgroup per kernel and a
seccomp filter. Used by instructor/sandbox_kernel.py (the launcher) and nbgrader_hooks.SandboxedExecute.

**A cgroup per kernel.** Every process of one graded kernel (bubblewrap, its init, the kernel and all
it forks) goes into a cgroup of its own, ``course-kernel-<launcher pid>``, created below the cgroup
the launcher already runs in (so any limit the machine puts on the grader still applies) and removed
when the kernel ends. It caps the memory of those processes *together* (``COURSE_SANDBOX_KERNEL_MEM_MB``,
default 4096 MB, swap included where the kernel accounts it; files the kernel writes to its tmpfs count
too) and their number (``COURSE_SANDBOX_NPROC`` + 2, bubblewrap's own two). Over the memory cap the
machine's OOM killer stops one of them, and ``SandboxedExecute`` then stops the kernel: the cell and
the cells after it score 0 with the reason. cgroup v1 (``memory`` and ``pids`` hierarchies) and cgroup
v2 (a cgroup whose ``memory`` and ``pids`` controllers can be handed to children, i.e. delegated) are
both handled; where neither can be written (no root, v2 without delegation, macOS) the sandbox falls
back to the per-process limits of ``sandbox_kernel.set_limits`` and ``cgroup_support`` says why.

**A seccomp filter** (classic BPF, loaded by ``bwrap --seccomp FD``): system calls that a graded
notebook has no use for and that widen what a process could do to the machine fail with ``EPERM``
(``DENIED``: ptrace, mounting, kernel modules, kexec, bpf, perf events, keyrings, namespaces,
personality, userfaultfd, other processes' memory); ``clone`` with a namespace flag fails with EPERM and
``clone3`` (whose flags a filter cannot read) with ``ENOSYS``, so the C library falls back to ``clone``;
a call made under another architecture's convention (32-bit ``int 0x80``, x32) kills the process.
Everything else is allowed. Only x86_64 and aarch64 are known; elsewhere there is no filter and
``seccomp_program`` says so.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import struct
import time
from pathlib import Path

CGROUP_ROOT = "/sys/fs/cgroup"
PREFIX = "course-kernel-"  # PREFIX + the launcher's pid
BWRAP_PROCESSES = 2  # bubblewrap and its init, in the cgroup next to the kernel


def kernel_memory_mb() -> int:
    return int(os.environ.get("COURSE_SANDBOX_KERNEL_MEM_MB", "4096"))


def nproc_limit() -> int:
    """Processes and threads one kernel may run together (``COURSE_SANDBOX_NPROC``, RLIMIT_NPROC)."""
    return int(os.environ.get("COURSE_SANDBOX_NPROC", "64"))


def kernel_pids() -> int:
    return nproc_limit() + BWRAP_PROCESSES


class CgroupUnavailable(RuntimeError):
    """cgroups cannot be used here; the message says why."""


def _write(path: str, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _own_cgroups() -> dict[str, str]:
    """{controller: this process's cgroup path}; cgroup v2's entry is under ``""``."""
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


class KernelCgroup:
    """One kernel's cgroup: in v1 a directory in each of the memory and pids hierarchies, in v2 one."""

    def __init__(self, version: int, dirs: list[str], memory_bytes: int, pids: int):
        self.version, self.dirs, self.memory_bytes, self.pids = version, dirs, memory_bytes, pids

    @classmethod
    def create(cls, name: str, memory_mb: int | None = None, pids: int | None = None,
               root: str | None = None) -> KernelCgroup:
        """A new cgroup ``name`` below this process's own, with its limits set; raises
        ``CgroupUnavailable`` (saying why) where neither cgroup version can be written."""
        root = root or CGROUP_ROOT
        memory = (kernel_memory_mb() if memory_mb is None else memory_mb) * 2**20
        pids = kernel_pids() if pids is None else pids
        try:
            own = _own_cgroups()
        except (OSError, ValueError) as err:
            raise CgroupUnavailable(f"no /proc/self/cgroup ({err})") from err
        reasons = []
        for make in (cls._create_v1, cls._create_v2):
            try:
                return make(root, own, name, memory, pids)
            except CgroupUnavailable as err:
                reasons.append(str(err))
        raise CgroupUnavailable("; ".join(reasons))

    @classmethod
    def _create_v1(cls, root, own, name, memory, pids) -> KernelCgroup:
        parents = {c: os.path.join(root, c) + own.get(c, "/") for c in ("memory", "pids")}
        missing = [c for c, p in parents.items() if c not in own
                   or not os.path.exists(os.path.join(p, "cgroup.procs"))]
        if missing:
            raise CgroupUnavailable(f"cgroup v1: no {' and no '.join(missing)} hierarchy under {root}")
        group = cls(1, [os.path.join(p, name) for p in parents.values()], memory, pids)
        try:
            for path in group.dirs:
                os.mkdir(path)
            memory_dir, pids_dir = group.dirs
            _write(f"{memory_dir}/memory.limit_in_bytes", str(memory))
            try:  # memory + swap, where the kernel accounts swap (swapaccount=1)
                _write(f"{memory_dir}/memory.memsw.limit_in_bytes", str(memory))
            except OSError:
                pass
            _write(f"{pids_dir}/pids.max", str(pids))
        except OSError as err:
            group.remove()
            raise CgroupUnavailable(f"cgroup v1: {err.strerror} ({err.filename})") from err
        return group

    @classmethod
    def _create_v2(cls, root, own, name, memory, pids) -> KernelCgroup:
        mount = next((m for m in (root, os.path.join(root, "unified"))
                      if os.path.exists(os.path.join(m, "cgroup.controllers"))), None)
        if mount is None or "" not in own:
            raise CgroupUnavailable(f"cgroup v2: not mounted at {root}")
        parent = mount + own[""].rstrip("/")
        try:
            available = Path(parent, "cgroup.controllers").read_text().split()
        except OSError as err:
            raise CgroupUnavailable(f"cgroup v2: {err.strerror} ({err.filename})") from err
        if not {"memory", "pids"} <= set(available):
            raise CgroupUnavailable(f"cgroup v2: the memory and pids controllers are not delegated to {parent} "
                                    f"(it has: {' '.join(available) or 'none'})")
        group = cls(2, [os.path.join(parent, name)], memory, pids)
        try:
            os.mkdir(group.dirs[0])
            # a cgroup that holds processes itself cannot hand controllers to children (EBUSY)
            _write(os.path.join(parent, "cgroup.subtree_control"), "+memory +pids")
            _write(f"{group.dirs[0]}/memory.max", str(memory))
            try:
                _write(f"{group.dirs[0]}/memory.swap.max", "0")
            except OSError:
                pass
            _write(f"{group.dirs[0]}/pids.max", str(pids))
        except OSError as err:
            group.remove()
            raise CgroupUnavailable(f"cgroup v2: {err.strerror} ({err.filename}; a delegated cgroup "
                                    "without processes of its own is needed)") from err
        return group

    def describe(self) -> dict:
        return {"version": self.version, "dirs": self.dirs, "memory_bytes": self.memory_bytes, "pids": self.pids}

    @classmethod
    def from_description(cls, data: dict) -> KernelCgroup:
        return cls(data["version"], data["dirs"], data["memory_bytes"], data["pids"])

    def join(self) -> None:
        """Put the calling process in this cgroup (in a child before it execs bubblewrap)."""
        for path in self.dirs:
            _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))

    def processes(self) -> list[int]:
        pids = set()
        for path in self.dirs:
            try:
                pids |= {int(p) for p in Path(path, "cgroup.procs").read_text().split()}
            except OSError:
                continue
        return sorted(pids)

    def oom_kills(self) -> int:
        """Processes the OOM killer stopped in this cgroup (0 where the kernel does not count them)."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            for line in Path(self.dirs[0], name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except OSError:
            pass
        return 0

    def remove(self, wait_s: float = 10.0) -> None:
        """Stop whatever still runs in it, then remove it."""
        deadline = time.monotonic() + wait_s
        pause = 0.002  # killed processes take a few milliseconds to leave it: look again soon, then less often
        for path in reversed(self.dirs):
            if not os.path.isdir(path):
                continue
            while True:
                for pid in self.processes():
                    try:
                        os.kill(pid, 9)
                    except OSError:
                        pass
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError as err:
                    if err.errno != errno.EBUSY or time.monotonic() > deadline:
                        raise
                    time.sleep(pause)
                    pause = min(2 * pause, 0.05)


def remove_stale(root: str | None = None) -> int:
    """Remove cgroups of kernels whose launcher is gone (it was killed before it could); how many."""
    removed = 0
    for version_dirs in _sibling_dirs(root or CGROUP_ROOT):
        for path in version_dirs:
            pid = os.path.basename(path)[len(PREFIX):]
            if not pid.isdigit() or _alive(int(pid)):
                continue
            try:
                KernelCgroup(1, [path], 0, 0).remove(wait_s=2.0)
                removed += 1
            except OSError:
                pass
    return removed


def _sibling_dirs(root: str) -> list[list[str]]:
    try:
        own = _own_cgroups()
    except (OSError, ValueError):
        return []
    parents = [os.path.join(root, c) + own[c] for c in ("memory", "pids") if c in own]
    if "" in own:
        parents += [m + own[""].rstrip("/") for m in (root, os.path.join(root, "unified"))]
    found = []
    for parent in parents:
        try:
            found.append([os.path.join(parent, d) for d in os.listdir(parent) if d.startswith(PREFIX)])
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cgroup_support(root: str | None = None) -> tuple[bool, str]:
    """(usable, one line for the report): a probe cgroup is created and removed."""
    try:
        group = KernelCgroup.create(f"{PREFIX}probe-{os.getpid()}", root=root)
    except CgroupUnavailable as err:
        per_process = int(os.environ.get("COURSE_SANDBOX_MEM_MB", "8192"))
        return False, (f"memory capped per process only ({per_process} MB each; no cap for a kernel's "
                       f"processes together): cgroups cannot be used here ({err})")
    group.remove()
    return True, (f"{group.memory_bytes // 2**20} MB of memory and {group.pids} processes per kernel "
                  f"(cgroup v{group.version})")


# ----------------------------------------------------------------------------------- the record

def record_path(ip: str) -> str:
    """Where the launcher describes its kernel's cgroup, next to the kernel's sockets (``ip`` is the
    connection file's, outside the sandbox)."""
    return f"{ip}-cgroup.json"


def write_record(ip: str, data: dict) -> None:
    path = record_path(ip)
    Path(path + ".tmp").write_text(json.dumps(data))
    os.replace(path + ".tmp", path)


def read_record(ip: str) -> dict | None:
    try:
        return json.loads(Path(record_path(ip)).read_text())
    except (OSError, ValueError):
        return None


def memory_cap_reached(ip: str) -> str | None:
    """A sentence if the kernel started with connection ip ``ip`` went over its memory cap, else None."""
    data = read_record(ip)
    if not data:
        return None
    kills = data.get("oom_kills")
    if kills is None:  # the kernel still runs (or its launcher was killed): ask the cgroup
        kills = KernelCgroup.from_description(data).oom_kills()
    if not kills:
        return None
    return (f"its processes together went over the kernel's memory cap of {data['memory_bytes'] // 2**20} MB "
            f"({kills} process{'es' if kills > 1 else ''} stopped by the out-of-memory killer)")


def release(ip: str) -> None:
    """Remove the kernel's cgroup if its launcher could not (it was killed)."""
    data = read_record(ip)
    if data and data.get("oom_kills") is None:
        try:
            KernelCgroup.from_description(data).remove()
        except OSError:
            pass


# ----------------------------------------------------------------------------------- seccomp

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# name: (x86_64 number from asm/unistd_64.h, aarch64 number from asm-generic/unistd.h)
DENIED = {
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "open_tree": (428, 428),
    "move_mount": (429, 429), "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432),
    "fspick": (433, 433), "mount_setattr": (442, 442), "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265), "swapon": (167, 224), "swapoff": (168, 225), "acct": (163, 89),
    "reboot": (169, 142), "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "unshare": (272, 97), "setns": (308, 268), "personality": (135, 92),
}
CLONE = {"x86_64": 56, "aarch64": 220}
CLONE3 = 435  # the same number on every architecture
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (CLONE_NEWTIME shares its bit
# with clone's exit-signal byte and is only accepted by clone3 and unshare, both refused anyway)
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
X32_SYSCALL_BIT = 0x40000000

# classic BPF: opcodes, and seccomp's return values
LD_ABS_W, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_KILL_PROCESS, RET_ALLOW, RET_ERRNO = 0x80000000, 0x7FFF0000, 0x00050000
NR, ARCH, ARG0 = 0, 4, 16  # offsets in struct seccomp_data (ARG0: the low half of args[0], little-endian)


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def seccomp_program(machine: str | None = None) -> tuple[bytes | None, str]:
    """(the compiled filter or None, one line for the report) for ``machine`` (default: this one)."""
    machine = machine or platform.machine()
    if machine in ("amd64", "arm64"):
        machine = {"amd64": "x86_64", "arm64": "aarch64"}[machine]
    if machine not in AUDIT_ARCH:
        return None, (f"no seccomp filter: the architecture {machine!r} is not supported "
                      f"(the filter knows {', '.join(AUDIT_ARCH)})")
    column = list(AUDIT_ARCH).index(machine)
    eperm, enosys = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS
    prog = [_op(LD_ABS_W, ARCH), _op(JEQ, AUDIT_ARCH[machine], 1, 0), _op(RET, RET_KILL_PROCESS), _op(LD_ABS_W, NR)]
    if machine == "x86_64":  # the x32 convention: the same calls with this bit set
        prog += [_op(JGE, X32_SYSCALL_BIT, 0, 1), _op(RET, RET_KILL_PROCESS)]
    for numbers in DENIED.values():
        prog += [_op(JEQ, numbers[column], 0, 1), _op(RET, eperm)]
    prog += [_op(JEQ, CLONE3, 0, 1), _op(RET, enosys),
             _op(JEQ, CLONE[machine], 0, 3), _op(LD_ABS_W, ARG0), _op(JSET, CLONE_NAMESPACES, 0, 1), _op(RET, eperm),
             _op(RET, RET_ALLOW)]
    return b"".join(prog), (f"seccomp filter ({machine}): {len(DENIED)} system calls and clone into new "
                            "namespaces refused")


def seccomp_fd() -> int | None:
    """A readable file descriptor holding this machine's filter (for ``bwrap --seccomp``), or None."""
    program, _ = seccomp_program()
    if program is None:
        return None
    read, write = os.pipe()  # the program is a few hundred bytes: it fits in the pipe's buffer
    os.write(write, program)
    os.close(write)
    return read

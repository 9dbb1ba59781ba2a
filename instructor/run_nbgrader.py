"""``python -m instructor.run_nbgrader ARGS``: nbgrader's command line (``python -m nbgrader ARGS``)
without an import it never uses, which costs 2 CPU seconds per process.

jsonschema (which nbformat, nbgrader and jupyter_server import) loads ``rfc3987_syntax`` when it is
installed, only to check the ``iri`` and ``iri-reference`` formats, and that package compiles about
40 lark grammars at import. No schema validated while grading uses those formats (the notebook
format's and nbgrader's cell metadata schemas have no ``format`` at all), so nothing nbgrader checks
changes; ``make autograde`` starts one nbgrader process per student, so this is paid per student.

``Zygote``: importing nbgrader and the course's plug-ins costs about 1.2 CPU seconds, once per
student when each student's ``nbgrader autograde`` is a new process. ``make autograde`` instead
starts one zygote (``python -m instructor.run_nbgrader --zygote``), a single-threaded process that
imports them once and forks a child per command: the child gets the command's environment, working
directory and arguments and runs nbgrader's ``main`` exactly as a new process would, writing its
output to a file; the zygote reports the exit status. A child is still a process of its own (one
student's grading cannot touch another's); what it inherits is only the imported, unused modules
and nbformat's two compiled notebook-schema validators (strict and relaxed, for the current format),
which nbformat otherwise compiles again in every child (0.2 CPU s).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading

UNUSED = ("rfc3987_syntax",)


def quiet_known_warnings() -> None:
    """nbgrader 0.9's gradebook relies on SQLAlchemy 1's cascade of new objects into the session;
    SQLAlchemy 2 warns "Object of type <SubmittedNotebook> not in session, add operation along ...
    will not proceed" on every submission, where nothing is lost (nbgrader adds those objects itself
    right after). Only that message is silenced."""
    import warnings

    warnings.filterwarnings("ignore", message=r"Object of type <\w+> not in session, add operation along")


def share_gradebook_engines() -> None:
    """nbgrader opens its gradebook (``nbgrader.api.Gradebook``) about 25 times per student, each time
    with a new SQLAlchemy engine, and SQLAlchemy keeps its cache of compiled statements per engine:
    every query was compiled again each time (about 0.13 CPU s per student). Here a process makes one engine
    per database URL and reuses it; each Gradebook still opens its own connections and closes them
    (``Gradebook.close`` disposes of the engine's pool), so what reaches the database is unchanged.
    Engines are keyed by process too: a forked child never uses its parent's."""
    import nbgrader.api as api

    if getattr(api.create_engine, "shared", False):
        return
    make = api.create_engine
    engines: dict = {}
    lock = threading.Lock()

    def create_engine(url, **kwargs):
        key = (os.getpid(), str(url), tuple(sorted(kwargs.items())))
        with lock:
            if key not in engines:
                engines[key] = make(url, **kwargs)
            return engines[key]

    create_engine.shared = True
    api.create_engine = create_engine


def skip_unused_imports() -> None:
    """Make ``import rfc3987_syntax`` fail (jsonschema then leaves out the ``iri`` format checks).
    Has no effect where jsonschema was already imported."""
    if "jsonschema" not in sys.modules:
        for name in UNUSED:
            sys.modules.setdefault(name, None)


# what every student's grading imports: nbgrader's apps, the course's plug-ins, the gradebook's SQLite
# dialect and IPython's input transformer (instructor/grading.py runs the solution with it)
PRELOAD = ("nbgrader.apps.nbgraderapp", "nbgrader.apps.autogradeapp", "nbgrader.apps.generatefeedbackapp",
           "instructor.nbgrader_hooks", "instructor.collect", "instructor.deadlines",
           "sqlalchemy.dialects.sqlite", "IPython.core.inputtransformer2")


def discard_spare_kernel() -> None:
    """Stop the kernel nbgrader_hooks.SandboxedExecute started ahead for a next notebook that never
    came (a notebook nbgrader skipped or could not read), before this process ends."""
    hooks = sys.modules.get("instructor.nbgrader_hooks")
    if hooks is not None:
        try:
            hooks.SandboxedExecute.discard_spare()
        except Exception:  # noqa: BLE001 - reported, as any error of nbgrader's would be
            import traceback

            traceback.print_exc()


def _child(request: dict) -> None:
    """In a forked child: become ``nbgrader ARGS`` as a new process would be, then exit."""
    code = 1
    try:
        out = os.open(request["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["nbgrader", *request["args"]]
        if request["args"][:1] == ["autograde"]:  # its first kernel boots while nbgrader starts
            try:
                sys.modules["instructor.nbgrader_hooks"].SandboxedExecute.start_first()
            except Exception:  # noqa: BLE001 - the first notebook then starts its kernel itself
                import traceback

                traceback.print_exc()
        from nbgrader.apps.nbgraderapp import main as nbgrader_main

        nbgrader_main()
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported in the output, as a new process's traceback would be
        import traceback

        traceback.print_exc()
    finally:
        discard_spare_kernel()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def serve() -> None:
    """The zygote: one JSON request per line on stdin ({id, args, env, cwd, output}), one JSON reply
    per finished child on stdout ({id, returncode}); ends when stdin closes and its children are done."""
    skip_unused_imports()
    quiet_known_warnings()
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    share_gradebook_engines()
    from nbformat.validator import get_validator

    for relaxed in (False, True):  # nbformat caches them in the process: compiled once, before the forks
        get_validator(relax_add_props=relaxed)
    replies = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing printed by accident mixes with the replies
    running: dict[int, object] = {}
    pending = b""
    open_stdin = True
    while open_stdin or running:
        ready, _, _ = select.select([0] if open_stdin else [], [], [], 0.05)
        if ready:
            chunk = os.read(0, 65536)
            open_stdin = bool(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in filter(None, lines):
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    os.close(replies)
                    _child(request)
                running[pid] = request["id"]
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            reply = {"id": running.pop(pid), "returncode": os.waitstatus_to_exitcode(status)}
            os.write(replies, (json.dumps(reply) + "\n").encode())


class Zygote:
    """The client side: ``run(args, env, cwd)`` -> (exit status, output) of ``nbgrader ARGS``, from any
    thread, each in a child forked by one zygote process (started on first use, stopped by ``close``)."""

    def __init__(self, cwd: str):
        self.cwd = str(cwd)
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._waiting: dict[int, list] = {}
        self._next = 0

    def _start(self) -> None:
        self._proc = subprocess.Popen([sys.executable, "-m", "instructor.run_nbgrader", "--zygote"], cwd=self.cwd,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        threading.Thread(target=self._read, args=(self._proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            reply = json.loads(line)
            with self._lock:
                slot = self._waiting.pop(reply["id"])
            slot[1] = reply["returncode"]
            slot[0].set()
        with self._lock:  # the zygote is gone: whoever still waits learns it
            for slot in self._waiting.values():
                slot[1] = None
                slot[0].set()
            self._waiting.clear()

    def run(self, args: list[str], env: dict[str, str], cwd: str, output: str) -> tuple[int, str]:
        slot = [threading.Event(), None]
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            self._next += 1
            ident = self._next
            self._waiting[ident] = slot
            request = {"id": ident, "args": args, "env": env, "cwd": str(cwd), "output": output}
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            self._proc.stdin.flush()
        slot[0].wait()
        text = open(output, errors="replace").read() if os.path.exists(output) else ""
        if slot[1] is None:
            return 1, text + "\nRuntimeError: the nbgrader zygote (instructor/run_nbgrader.py) stopped\n"
        return slot[1], text

    def close(self) -> None:
        if self._proc is not None:
            self._proc.stdin.close()
            self._proc.wait()


def main() -> None:
    if sys.argv[1:] == ["--zygote"]:
        serve()
        return
    skip_unused_imports()
    quiet_known_warnings()
    share_gradebook_engines()
    from nbgrader.apps.nbgraderapp import main as nbgrader_main

    sys.argv[0] = "nbgrader"
    try:
        nbgrader_main()
    finally:
        discard_spare_kernel()


if __name__ == "__main__":
    main()

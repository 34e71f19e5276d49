"""The demo's child processes: stopped on every exit path, and found again after a crash.

``sumpwatch demo`` runs a broker and a simulator as children of the process that
serves the gateway. Two things could leave them behind:

* uvicorn captures SIGTERM/SIGINT, shuts down, restores the handlers it found and
  raises the signal again. With Python's default SIGTERM handler that kills the
  process outright and no ``finally`` runs. :func:`exit_on_signals` installs
  handlers that raise SystemExit instead, so the cleanup always runs.
* ``kill -9`` runs nothing. The children's pids are written to a pid file in the
  data dir; the next demo on that dir stops those processes first (after checking
  they are still the demo's own, by command line), so a second broker never opens
  the same persistence directory while the first still writes to it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import psutil

PID_FILE = "demo-children.json"


def _exit(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def exit_on_signals() -> None:
    """SIGTERM raises SystemExit (uvicorn re-raises it after its own shutdown)."""
    signal.signal(signal.SIGTERM, _exit)


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """Let cleanup finish: a second Ctrl-C or SIGTERM must not cut it short."""
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def record_children(data_dir: Path, pids: dict[str, int]) -> None:
    """Remember the children (name -> pid) with their command lines."""
    entries = {}
    for name, pid in pids.items():
        with contextlib.suppress(psutil.Error):
            entries[name] = {"pid": pid, "cmdline": psutil.Process(pid).cmdline()}
    (data_dir / PID_FILE).write_text(json.dumps(entries))


def forget_children(data_dir: Path) -> None:
    """The children were stopped: nothing stale is left."""
    (data_dir / PID_FILE).unlink(missing_ok=True)


def stop_stale_children(data_dir: Path, timeout: float = 10.0) -> list[int]:
    """Stop children a killed demo left running on this data dir; return their pids.

    A pid is only acted on when the process still has the recorded command line,
    so a recycled pid of an unrelated process is left alone.
    """
    path = data_dir / PID_FILE
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    stale = []
    for entry in entries.values():
        with contextlib.suppress(psutil.Error, KeyError, TypeError):
            proc = psutil.Process(int(entry["pid"]))
            if proc.cmdline() == entry["cmdline"] and proc.pid != os.getpid():
                stale.append(proc)
    for proc in stale:
        with contextlib.suppress(psutil.Error):
            proc.terminate()  # Mosquitto saves its persistence file on SIGTERM
    _, alive = psutil.wait_procs(stale, timeout=timeout)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    path.unlink(missing_ok=True)
    return [p.pid for p in stale]

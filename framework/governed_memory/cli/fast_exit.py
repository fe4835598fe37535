"""Leave the process without tearing the interpreter down, once a command is done.

After a command has returned (its manager closed: the database, the trail and every
sink flushed, fsynced and closed), Python's finalization still frees each of the ~400
modules a command imports, with their classes and caches: 50-70 ms here, a fifth of one
``governed-memory add``, spent on nothing the user can see. So the console script runs
the ``atexit`` handlers (logging's flush, an OpenTelemetry SDK's span export, anything a
plugin registered), flushes stdout and stderr, and calls ``os._exit``.

It does so only when that is safe: no thread but the main one may still run (their
work would be cut off), and this Python must offer ``atexit._run_exitfuncs``;
otherwise it exits the ordinary way. :func:`governed_memory.cli.main.main` itself
keeps the ordinary ``SystemExit``, for whoever calls it from Python.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_code(code: object) -> int:
    """``SystemExit.code`` as a process exit status (a message is printed, then 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def leave(code: object) -> NoReturn:
    """Exit with ``code`` (a ``SystemExit.code``), skipping finalization when safe."""
    status = exit_code(code)
    run_exit_functions = getattr(atexit, "_run_exitfuncs", None)
    busy = [thread for thread in threading.enumerate()
            if thread is not threading.main_thread() and thread.is_alive()
            and not thread.daemon]
    if busy or run_exit_functions is None:
        sys.exit(status)
    run_exit_functions()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: what Python's own exit reports
        os._exit(120)
    os._exit(status)

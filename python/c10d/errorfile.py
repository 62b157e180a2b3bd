"""The launcher's error file for Python ranks (torchrun's and c10drun's TORCHELASTIC_ERROR_FILE).

A rank that fails with an uncaught exception writes it there, so the launcher's failure summary
names the error instead of only "exited with code 1". init_process_group() arranges this when a
launcher named a file (as the C++ library does for C++ programs); record() is torch's decorator
of the same name, for a main() that may fail before it initialises anything.
"""

import functools
import os
import sys
import traceback

from ctypes import byref, c_int

from ._capi import check, lib

_installed = False


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _describe(kind, error, tb):
    """One line: the exception and the program's line it came from (launcher summaries print it
    as is): the innermost frame outside this package, where the program called us."""
    frames = traceback.extract_tb(tb) if tb is not None else []
    ours = [f for f in frames if not os.path.abspath(f.filename).startswith(_PACKAGE)]
    last = (ours or frames or [None])[-1]
    where = f" (at {last.filename}:{last.lineno} in {last.name})" if last else ""
    return f"{kind.__name__}: {error}{where}"


def write_error_file(message):
    """Writes message as the error file; False when no launcher named one."""
    written = c_int()
    check(lib.c10d_write_error_file(str(message).encode("utf-8", "replace"), byref(written)))
    return bool(written.value)


def install_excepthook():
    """Makes an uncaught exception write the error file before Python reports it (once)."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = sys.excepthook

    def hook(kind, error, tb):
        if not issubclass(kind, KeyboardInterrupt):
            write_error_file(_describe(kind, error, tb))
        previous(kind, error, tb)

    sys.excepthook = hook


def record(fn):
    """Decorator: an exception escaping fn is written to the error file, then re-raised."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SystemExit:
            raise
        except BaseException:
            kind, error, tb = sys.exc_info()
            write_error_file(_describe(kind, error, tb))
            raise
    return wrapper

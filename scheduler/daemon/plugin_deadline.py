"""A deadline on out-of-tree plugin calls: a plugin that hangs fails its pod, not the scheduler.

Decisions are sequential, as kube-scheduler's are (pkg/scheduler/schedule_one.go: one
``scheduleOne`` at a time), so a Filter, Score, Reserve or Permit that never returns would hold
every later pod. kube-scheduler has no such deadline: a Go plugin that hangs hangs the
scheduler. berthmaster loads plugins from any installed package (docs/plugins.md), so it bounds
each call of an out-of-tree plugin in the scheduling cycle by ``--plugin-timeout`` seconds.

Design: nothing on the hot path. A daemon thread samples the main thread's stack (where the
event loop and so every cycle run) every tenth of the deadline. The containment wrappers of
:mod:`~berthmaster.scheduler.plugins.out_of_tree` and the cycle's Reserve and Permit calls of
:mod:`.extensions` are the *guarded* code: when the same call of one of them (the same frame
object, held by the thread so that its identity cannot be reused) is on the stack for the
deadline, the thread interrupts the main thread (``_thread.interrupt_main``) with
:data:`SIGNAL`. The handler, in the main thread, raises :class:`PluginTimeout` from inside the
plugin only if that call is still on the stack; the wrapper's ``except Exception`` turns it
into the plugin's Error (``running "X" filter plugin: ...``), so the pod fails with
SchedulerError and is retried with backoff while the other pods go on, as for a plugin that
raises.

Limits (docs/plugins.md): code that never returns to the interpreter (a C extension's loop, a
regular expression that backtracks for ever) cannot be interrupted; a plugin that catches the
exception and carries on is interrupted again after each further deadline. Async extension
points (PreBind, Bind) run in their pod's binding task, where a hang holds that pod only.
"""

from __future__ import annotations

import _thread
import logging
import signal
import sys
import threading
import time
from types import CodeType, FrameType
from typing import Any

from berthmaster.scheduler.daemon.extensions import Extensions
from berthmaster.scheduler.plugins import out_of_tree

log = logging.getLogger("berthmaster.scheduler")

SIGNAL = signal.SIGUSR2


class PluginTimeout(Exception):
    """Raised inside a plugin call that outlived the deadline."""


def _guarded_code() -> frozenset[CodeType]:
    nested = [c for c in out_of_tree._contained_check.__code__.co_consts
              if isinstance(c, CodeType)]
    return frozenset((out_of_tree.ContainedPredicate.prefilter.__code__,
                      out_of_tree.ContainedPriority.scores.__code__,
                      Extensions.reserve.__code__, Extensions.permit.__code__, *nested))


GUARDED = _guarded_code()


def guarded_call(frame: FrameType | None) -> FrameType | None:
    """The outermost guarded frame on the stack that ends at ``frame``, if any."""
    found = None
    while frame is not None:
        if frame.f_code in GUARDED:
            found = frame
        frame = frame.f_back
    return found


# the calls a watchdog asked to interrupt, with their deadline; read by the signal handler
_overdue: dict[int, tuple[FrameType, float]] = {}
_installed = False


def _on_signal(signum: int, frame: FrameType | None) -> None:
    call = guarded_call(frame)
    if call is None:
        return
    marked = _overdue.pop(id(call), None)
    if marked is not None and marked[0] is call:
        raise PluginTimeout(f"did not return within {marked[1]:g}s and was interrupted "
                            "(the scheduler's --plugin-timeout)")


class PluginDeadline:
    """The watchdog of one scheduler: :meth:`start` from the main thread, :meth:`stop` when
    the scheduler stops."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._main = threading.main_thread().ident

    def start(self) -> bool:
        """Start watching; False (and a log line) where it cannot: off the main thread, where
        signal handlers cannot be installed."""
        global _installed
        if self.seconds <= 0:
            return False
        if threading.current_thread() is not threading.main_thread():
            log.warning("plugin deadline off: the scheduler does not run in the main thread")
            return False
        if not _installed:
            signal.signal(SIGNAL, _on_signal)
            _installed = True
        self._thread = threading.Thread(target=self._watch, name="plugin-deadline", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _watch(self) -> None:
        every = max(0.05, self.seconds / 10)
        watched: FrameType | None = None
        since = 0.0
        while not self._stop.wait(every):
            call = guarded_call(_main_frame(self._main))
            now = time.monotonic()
            if call is not watched:
                if watched is not None:  # returned, or interrupted: forget the mark
                    _overdue.pop(id(watched), None)
                watched, since = call, now
                continue
            if call is not None and now - since >= self.seconds:
                _overdue[id(call)] = (call, self.seconds)
                _thread.interrupt_main(SIGNAL)
                since = now  # interrupt again after another deadline if it carries on
        if watched is not None:
            _overdue.pop(id(watched), None)


def _main_frame(ident: int | None) -> FrameType | None:
    frames: dict[int, Any] = sys._current_frames()
    return frames.get(ident) if ident is not None else None

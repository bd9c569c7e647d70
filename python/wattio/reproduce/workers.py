"""Where an experiment's independent runs go: local worker processes by default, or a Dask
cluster for the duration of :func:`placed` (``wattio reproduce --scheduler tcp://HOST:PORT``,
``--jobs N``), through the same executors as ``wattio sweep`` (:mod:`wattio.sweep`).

An experiment hands its grid to :func:`map_runs`; the runs are pure functions of their
arguments, so the results do not depend on where they ran. On a cluster the workers import
wattio and read the traces by path, so they need the same files (a shared file system, or
one machine).
"""

from __future__ import annotations

import contextlib
import os

_PLACE: dict = {"jobs": None, "executor": None}


@contextlib.contextmanager
def placed(*, jobs: int | None = None, scheduler: str | None = None, executor=None):
    """Send :func:`map_runs` to ``jobs`` local processes, or to the Dask scheduler at
    ``scheduler`` (one connection for the whole block), or to ``executor`` (a
    ``distributed.Client`` or any ``concurrent.futures.Executor``), until the block ends."""
    from wattio.sweep import _executor

    if jobs is not None and jobs < 1:
        raise ValueError(f"--jobs {jobs}: expected at least 1")
    saved = dict(_PLACE)
    try:
        if scheduler is not None or executor is not None:
            with _executor(executor, scheduler, jobs, 2) as ex:
                _PLACE.update(jobs=jobs, executor=ex)
                yield
        else:
            _PLACE.update(jobs=jobs, executor=None)
            yield
    finally:
        _PLACE.clear()
        _PLACE.update(saved)


def map_runs(fn, items, max_workers: int | None = None) -> list:
    """``[fn(x) for x in items]``, run where :func:`placed` says: by default in up to
    ``max_workers`` local processes (None: one per core; ``--jobs`` overrides it). ``fn``
    must be a module-level function (workers import it)."""
    from wattio.sweep import _executor

    items = list(items)
    if _PLACE["executor"] is not None:
        # A cluster's workers did not start from this process: the settings that reach a
        # run through the environment travel with each call.
        env = _carried()
        return list(_PLACE["executor"].map(_InEnv(env, fn) if env else fn, items))
    with _executor(None, None, _PLACE["jobs"] or max_workers, len(items)) as ex:
        return list(ex.map(fn, items)) if ex is not None else [fn(x) for x in items]


def _carried() -> dict:
    """The environment variables that change a run (``wattio reproduce --check-data``'s)."""
    from wattio.api import CHECK_DATA_ENV

    return {k: os.environ[k] for k in (CHECK_DATA_ENV,) if k in os.environ}


class _InEnv:
    """``fn`` run with ``env`` set in the (worker) process for the call, the environment as it
    was after. Named as ``fn`` (a Dask task's key is its function's name)."""

    def __init__(self, env: dict, fn):
        self.env, self.fn = env, fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, x):
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            return self.fn(x)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

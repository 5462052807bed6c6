"""Candidates compile in a process pool while the GPU times another, so a
sweep is bound by GPU time, not by NVRTC.

A compile job is one call of a workload under one candidate policy at one
size (`CompileJob`). A worker (a spawned process: it creates no CUDA context
and needs no GPU) runs that call in the interpreter's host path with
`tilecore.launch` replaced by a recorder, so the algorithm plans the call as
it would on the GPU and hands over each launch's (kernel, arguments) without
running anything; then it compiles each kernel with `tilecore.compile(kernel,
args, arch=...)`, which builds through the shared disk cache
(TILECORE_CACHE_DIR, inherited from the parent). When the GPU process later
launches the same specialization, its build finds the cubin on disk: no NVRTC
call (it still lowers the kernel to find the cache key, about 10 ms).

What makes the recorded launches the GPU's own:
- the policy: the worker enters `override_policy(algorithm, **policy)` with the
  complete candidate policy, and plans for the device's architecture
  (TILECORE_ARCH set to it while the call is planned);
- the grid-dependent constants (a scan's reduce-then-scan grid, a segmented
  reduce's kernel shape): the interpreter's stand-in SM count is set to the
  device's (`dispatch.target.INTERPRETER_SMS`, in the worker only);
- the arrays: stand-ins with the device arrays' dtype, length, unit stride and
  alignment (anonymous memory mapped without reserving it: nothing is read or
  written, so a 2^28-item stand-in costs no memory), so the array facts the
  code generator specializes on (alignment, unit stride, whole vectors) are
  those of the GPU's arrays.

`CompilePool` keeps at most `workers` jobs running: `wait(jobs)` puts its jobs
at the head of the queue (the candidate the GPU times next) and `prefetch`
queues others: the search's next candidates (`soon`) right behind them, then
speculative ones (the neighbours of the best so far, the later studies'
baselines). `first_done(groups)` tells which of several candidates (the
search's next few) has its kernels compiled first, so that the GPU times that
one instead of idling behind a slow compile (H100, 2026-11-27: one scan
candidate's kernels took 65 s of a sweep's 82 s of compile waits).
A job's failure (a compile error, a resource limit the compiler reports) comes
back as `CompileResult.error`; the pool itself never raises for a candidate.
"""
from __future__ import annotations

import mmap
import multiprocessing
import os
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor
from concurrent.futures import wait as wait_futures
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import numpy as np

from ..language import dtypes as D
from .workloads import Workload, array_layout, invoke, segment_offsets

__all__ = ["CompileJob", "CompileResult", "CompilePool", "capture", "compile_job",
           "candidate_jobs", "default_workers"]


@dataclass(frozen=True)
class CompileJob:
    """The kernels of one call: `workload` at `n` items (`segments`: the
    segment distribution of a segmented reduce) under the complete `policy`
    (sorted (field, value) pairs, hashable)."""
    workload: Workload
    n: int
    segments: Optional[str]
    policy: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, workload: Workload, n: int, segments: Optional[str], policy: dict
           ) -> "CompileJob":
        return cls(workload, n, segments, tuple(sorted(policy.items())))


def candidate_jobs(workload: Workload, sizes: Sequence[int], policy: dict) -> list[CompileJob]:
    """The jobs of one candidate: one per size and segment distribution (the
    sweep's cases, in its order)."""
    return [CompileJob.of(workload, n, seg, policy) for n in sizes for seg in workload.segments]


@dataclass(frozen=True)
class CompileResult:
    """kernels: launches compiled; built: how many of them NVRTC compiled (the
    others were in the cache); seconds: the worker's wall time; error: why
    the job failed (None: it did not)."""
    kernels: int = 0
    built: int = 0
    seconds: float = 0.0
    error: Optional[str] = None


def default_workers() -> int:
    """One worker per CPU but one (the GPU process needs one), at most 8, at least 1."""
    return max(1, min(8, (os.cpu_count() or 2) - 1))


def _stand_in(dtype, count: int) -> np.ndarray:
    """A writable array of `count` items in untouched anonymous memory (page aligned)."""
    nbytes = max(count * dtype.itemsize, 1)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=flags), dtype=dtype.numpy_dtype,
                         count=count)


def capture(job: CompileJob, arch: str, sm_count: int) -> list[tuple]:
    """The (kernel, args) launches of `job`'s call, planned for `arch` with
    `sm_count` SMs on stand-in arrays; nothing runs. Patches `tilecore.launch`
    and the interpreter's SM count while it plans: call it in a compile
    worker (or a test that restores them)."""
    import tilecore
    from .. import config
    from ..dispatch import override_policy, target
    w = job.workload
    offsets = segment_offsets(job.segments, job.n) if job.segments is not None else None
    num_segments = 0 if offsets is None else len(offsets) - 1
    arrays = {name: _stand_in(dt, count)
              for name, (dt, count) in array_layout(w, job.n, num_segments).items()}
    if offsets is not None:
        arrays.update(begins=arrays["offsets"][:-1], ends=arrays["offsets"][1:],
                      segments=num_segments)
    launches: list[tuple] = []
    saved = tilecore.launch, target.INTERPRETER_SMS
    tilecore.launch = lambda stream, grid, kernel, args: launches.append((kernel, tuple(args)))
    target.INTERPRETER_SMS = sm_count
    target._interpreter.clear()
    try:
        with config.override("TILECORE_ARCH", arch), override_policy(w.algorithm,
                                                                     **dict(job.policy)):
            nbytes = invoke(w, None, arrays, job.n, None)
            temp = _stand_in(D.uint8, max(nbytes, 1))
            invoke(w, temp, arrays, job.n, None)
    finally:
        tilecore.launch, target.INTERPRETER_SMS = saved
        target._interpreter.clear()
    return launches


def compile_job(job: CompileJob, arch: str, sm_count: int) -> CompileResult:
    """Compile every kernel of `job` for `arch` into the disk cache (a worker's task)."""
    import tilecore
    from ..runtime.cache import default_cache
    t0 = time.perf_counter()
    cache = default_cache()
    misses = cache.misses
    try:
        launches = capture(job, arch, sm_count)
        for kernel, args in launches:
            tilecore.compile(kernel, args, arch=arch)
    except Exception as e:  # a candidate that does not compile is a result, not a crash
        return CompileResult(0, cache.misses - misses, time.perf_counter() - t0,
                             f"{type(e).__name__}: {e}")
    return CompileResult(len(launches), cache.misses - misses, time.perf_counter() - t0)


class CompilePool:
    """Compile jobs in `workers` spawned processes for `arch` (a device with
    `sm_count` SMs); see the module docstring. Thread-safe."""

    def __init__(self, arch: str, sm_count: int, workers: int) -> None:
        if workers < 1:
            raise ValueError(f'Invalid argument "workers": expected at least 1, got {workers}')
        self.arch, self.sm_count, self.workers = arch, sm_count, workers
        self._lock = threading.RLock()   # a done callback may run in the submitting thread
        self._queue: deque[CompileJob] = deque()
        self._futures: dict[CompileJob, Future] = {}
        self._running: set[CompileJob] = set()
        self._executor = self._start()
        self.compiled = 0          # kernels compiled (or found in the cache) by the workers
        self.built = 0             # ... of which NVRTC built
        self.worker_seconds = 0.0  # the workers' summed wall time

    def _start(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))

    def _future(self, job: CompileJob) -> Future:
        f = self._futures.get(job)
        if f is None:
            f = self._futures[job] = Future()
            self._queue.append(job)
        return f

    def _ahead(self, jobs: Sequence[CompileJob]) -> None:
        """Move the queued ones of `jobs` to the head of the queue, in order (lock held)."""
        for job in reversed(jobs):
            if job not in self._running and not self._futures[job].done():
                self._queue.remove(job)
                self._queue.appendleft(job)

    def prefetch(self, jobs: Iterable[CompileJob], soon: bool = False) -> None:
        """Queue `jobs` behind those queued already (speculative work), or with
        `soon` ahead of them (the search's next candidates, needed before any
        speculative job)."""
        with self._lock:
            jobs = list(jobs)
            for job in jobs:
                self._future(job)
            if soon:
                self._ahead(jobs)
            self._feed()

    def wait(self, jobs: Sequence[CompileJob], timeout: float) -> list[CompileResult]:
        """Compile `jobs` first (ahead of every queued job) and return their
        results; a job not done within `timeout` seconds is reported as an
        error (its worker finishes it in the background)."""
        with self._lock:
            futures = [self._future(job) for job in jobs]
            self._ahead(jobs)
            self._feed()
        deadline = time.monotonic() + timeout
        out = []
        for job, f in zip(jobs, futures):
            try:
                out.append(f.result(timeout=max(0.0, deadline - time.monotonic())))
            except TimeoutError:
                out.append(CompileResult(error=f"compile timed out after {timeout:.0f} s"))
        return out

    def first_done(self, groups: Sequence[Sequence[CompileJob]], timeout: float) -> int:
        """The index of the first of `groups` (candidates, each its jobs, in
        order of preference) whose jobs are all done, waiting up to `timeout`
        seconds for one (then 0). Their jobs go to the head of the queue, in
        order. A job that failed counts as done: its candidate fails at once."""
        with self._lock:
            futures = [[self._future(job) for job in group] for group in groups]
            self._ahead([job for group in groups for job in group])
            self._feed()
        deadline = time.monotonic() + timeout
        while True:
            for i, group in enumerate(futures):
                if all(f.done() for f in group):
                    return i
            left = deadline - time.monotonic()
            if left <= 0:
                return 0
            wait_futures([f for group in futures for f in group if not f.done()], timeout=left,
                         return_when=FIRST_COMPLETED)

    def _feed(self) -> None:
        """Hand queued jobs to the executor while fewer than `workers` run (lock held)."""
        while self._queue and len(self._running) < self.workers:
            job = self._queue.popleft()
            outer = self._futures[job]
            if outer.done():
                continue
            executor = self._executor
            try:
                inner = executor.submit(compile_job, job, self.arch, self.sm_count)
            except (BrokenProcessPool, RuntimeError) as e:
                self._restart()
                outer.set_result(CompileResult(error=f"the compile pool broke: {e}"))
                continue
            self._running.add(job)
            inner.add_done_callback(lambda f, job=job, ex=executor: self._done(job, f, ex))

    def _done(self, job: CompileJob, inner: Future, executor: ProcessPoolExecutor) -> None:
        with self._lock:
            self._running.discard(job)
            outer = self._futures[job]
            try:
                result = inner.result()
            except BrokenProcessPool as e:   # a worker died (a crash inside NVRTC, say)
                result = CompileResult(error=f"a compile worker died: {e}")
                if executor is self._executor:
                    self._restart()
            except Exception as e:
                result = CompileResult(error=f"{type(e).__name__}: {e}")
            self.compiled += result.kernels
            self.built += result.built
            self.worker_seconds += result.seconds
            if not outer.done():
                outer.set_result(result)
            self._feed()

    def _restart(self) -> None:
        """Replace a broken executor (lock held); the jobs it ran get an error
        through _done."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._executor = self._start()
        self._running.clear()

    def close(self) -> None:
        """Drop queued jobs and stop the workers (running jobs are abandoned)."""
        with self._lock:
            self._queue.clear()
            for f in self._futures.values():
                if not f.done():
                    f.set_result(CompileResult(error="the compile pool was closed"))
            executor = self._executor
        executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> "CompilePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

"""compile_pool.py on the CPU: capture() plans a workload's call in the
interpreter's host path for a GPU's architecture and SM count without running
anything; compile_job()/CompilePool build the captured kernels with NVRTC
for sm_90 (no GPU needed)."""
import time

import numpy as np
import pytest

import tilecore
from tilecore.dispatch import target
from tilecore.tune import compile_pool
from tilecore.tune.compile_pool import (CompileJob, CompilePool, CompileResult, candidate_jobs,
                                        capture, compile_job)
from tilecore.tune.workloads import Workload

pytestmark = pytest.mark.interpreter_only     # nothing runs in the interpreter here

REDUCE = Workload("reduce", "float32", "add")
POLICY = {"block_threads": 256, "items_per_thread": 16, "blocks_per_sm": 4,
          "single_block_max_items": 65536, "final_block_threads": 256, "single_block_threads": 1024}


def ints(args):
    return [a for a in args if type(a) is int]


def shapes(args):
    return [a.shape for a in args if isinstance(a, np.ndarray)]


def test_capture_plans_for_the_device_without_running():
    saved = tilecore.launch, target.INTERPRETER_SMS
    n = 1 << 28                                  # 1 GiB of stand-ins: never touched
    launches = capture(CompileJob.of(REDUCE, n, None, POLICY), "sm_90", 132)
    assert (tilecore.launch, target.INTERPRETER_SMS) == saved
    assert len(launches) == 2                    # the partials pass, then the final pass
    (first, first_args), (final, final_args) = launches
    # the first pass writes a partial per block: at most sm_count * blocks_per_sm = 528
    # blocks, 2^16 tiles need 125 each, and 525 blocks of at most 125 tiles cover them
    assert shapes(first_args) == [(n,), (525,)]
    assert shapes(final_args) == [(525,), (1,)]
    assert 256 * 16 in ints(first_args)                # the policy's tile
    other = capture(CompileJob.of(REDUCE, n, None, {**POLICY, "blocks_per_sm": 2,
                                                    "items_per_thread": 8}), "sm_90", 100)
    assert shapes(other[0][1]) == [(n,), (200,)] and 256 * 8 in ints(other[0][1])
    # at most single_block_max_items: one single-block kernel
    small = capture(CompileJob.of(REDUCE, 65536, None, POLICY), "sm_90", 132)
    assert len(small) == 1 and shapes(small[0][1]) == [(65536,), (1,)]


def test_capture_of_a_segmented_reduce_sees_the_segments():
    w = Workload("segmented_reduce", "int32", "max")
    from tilecore.tune.workloads import current_policy, segment_offsets
    policy = current_policy("segmented_reduce", 90, w.key)
    launches = capture(CompileJob.of(w, 1 << 20, "short", policy), "sm_90", 132)
    segments = len(segment_offsets("short", 1 << 20)) - 1
    assert launches and all((1 << 20,) in shapes(args) for _, args in launches[:1])
    assert any((segments,) in shapes(args) for _, args in launches)


def test_compile_job_builds_or_reports(tmp_path):
    job = CompileJob.of(REDUCE, 1 << 20, None, POLICY)
    result = compile_job(job, "sm_90", 132)
    assert result.error is None and result.kernels == 2
    bad = CompileJob.of(REDUCE, 1 << 20, None, {**POLICY, "block_threads": 48})
    result = compile_job(bad, "sm_90", 132)
    assert result.kernels == 0 and "block_threads" in result.error


def test_pool_compiles_in_a_worker(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path))    # the worker builds afresh
    good = CompileJob.of(REDUCE, 1 << 20, None, POLICY)
    bad = CompileJob.of(REDUCE, 1 << 20, None, {**POLICY, "block_threads": 48})
    with CompilePool("sm_90", 132, workers=1) as pool:
        pool.prefetch([bad])
        ok, failed = pool.wait([good, bad], timeout=120)
        assert ok.error is None and ok.kernels == 2 and ok.built == 2
        assert "block_threads" in failed.error
        again, = pool.wait([good], timeout=1)                 # the same job: its result
        assert again == ok and pool.compiled == 2 and pool.built == 2
    assert any(tmp_path.rglob("*")), "nothing written to the worker's disk cache"
    with pytest.raises(ValueError, match="workers"):
        CompilePool("sm_90", 132, workers=0)


def test_prefetch_soon_goes_ahead_of_speculative_jobs(monkeypatch):
    """The search's next candidates (soon) queue before speculative jobs, in
    their own order; a job queued twice stays one job."""
    with CompilePool("sm_90", 132, workers=1) as pool:
        monkeypatch.setattr(pool, "_feed", lambda: None)      # keep everything queued
        pool.prefetch(["spec1", "spec2"])
        pool.prefetch(["next1", "next2", "spec2"], soon=True)
        assert list(pool._queue) == ["next1", "next2", "spec2", "spec1"]
        pool.prefetch(["spec1"])
        assert list(pool._queue) == ["next1", "next2", "spec2", "spec1"]


class ThreadPool(CompilePool):
    """A CompilePool whose workers are threads (the fake compile_job below runs in them)."""

    def _start(self):
        from concurrent.futures import ThreadPoolExecutor
        return ThreadPoolExecutor(self.workers)


def fake_compile(seconds):
    """compile_job replaced by a sleep of seconds[job] (a model of NVRTC's time, not a compile)."""
    def compile_job(job, arch, sm_count):
        time.sleep(seconds.get(job, 0.0))
        return CompileResult(1, 1, seconds.get(job, 0.0), "failed" if job == "bad" else None)
    return compile_job


def test_first_done_takes_the_candidate_compiled_first(monkeypatch):
    """A candidate whose compile is slow does not hold up one compiled after it:
    first_done answers with the first whose jobs are all done (a failed job
    counts: its candidate fails at once), in order of preference when several
    are, and 0 when none is done in time."""
    monkeypatch.setattr(compile_pool, "compile_job", fake_compile({"slow": 3.0, "a": 0.2}))
    with ThreadPool("sm_90", 132, workers=3) as pool:
        t0 = time.monotonic()
        assert pool.first_done([["slow"], ["a", "b"], ["c"]], timeout=20) in (1, 2)
        assert time.monotonic() - t0 < 2
        pool.wait(["a", "b", "c"], timeout=5)
        assert pool.first_done([["slow"], ["c"], ["a"]], timeout=20) == 1
        assert pool.first_done([["slow"], ["bad"]], timeout=20) == 1
        t0 = time.monotonic()
        assert pool.first_done([["slow"]], timeout=0.2) == 0
        assert 0.2 <= time.monotonic() - t0 < 2


def test_first_done_queues_its_candidates_ahead_in_order(monkeypatch):
    with CompilePool("sm_90", 132, workers=1) as pool:
        monkeypatch.setattr(pool, "_feed", lambda: None)      # keep everything queued
        pool.prefetch(["spec1", "next2"])
        assert pool.first_done([["next1"], ["next2", "next3"]], timeout=0) == 0
        assert list(pool._queue) == ["next1", "next2", "next3", "spec1"]


def test_candidate_jobs_are_the_sweeps_cases():
    seg = Workload("segmented_reduce", "float32", "add")
    jobs = candidate_jobs(seg, (1 << 16, 1 << 20), {"block_threads": 128})
    assert [(j.n, j.segments) for j in jobs] == [(n, seg) for n in (1 << 16, 1 << 20)
                                                 for seg in ("short", "uneven", "long")]
    assert jobs[0] == CompileJob.of(seg, 1 << 16, "short", {"block_threads": 128})
    assert len(candidate_jobs(REDUCE, (1 << 16, 1 << 20), POLICY)) == 2

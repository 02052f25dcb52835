"""The cluster's summed moments on the look-ahead grids, kept up to date per event.

Seed 004 §5.2 splits each moment policy into sub-policies with look-ahead horizons of 3 years,
1 year, 1 month, 1 week and 24 hours, each discretised into 600 steps. Here a sub-policy's steps sit
on an absolute grid ``k * h`` (``h`` = horizon / steps); at time ``t`` its window is the ``steps``
grid points after ``t``. Each deployment's contribution (mean and variance of its size at each
point) is a function of its belief snapshot taken at its last event, so the sums over deployments
change only when (a) a deployment has an event — its old contribution is subtracted and the new
one added, over the window only — or (b) the window slides onto new grid points, which are
evaluated once for every deployment. Per arrival that is O(changed deployments x grid + deployments
x new points) instead of O(deployments x grid) (``naive=True`` does the latter, for the benchmark).
"""

from __future__ import annotations

import math

import numpy as np

from tracelab.analysis.admission_model import SNAPSHOT_FIELDS, FloatArray, size_moments

#: full recomputation this often (arrivals) so add/subtract rounding cannot accumulate
_REFRESH_EVERY = 2000


class ClusterMoments:
    """Sum over admitted deployments of E[size] and Var[size] on every sub-policy's window."""

    def __init__(
        self,
        lookahead_hours: tuple[float, ...],
        steps: int,
        nu: float,
        alpha: float,
        *,
        naive: bool = False,
    ) -> None:
        self.steps = steps
        self.step_hours = np.array([h / steps for h in lookahead_hours], dtype=np.float64)
        self.nu = nu
        self.alpha = alpha
        self.naive = naive
        n = len(lookahead_hours) * steps
        self.times: FloatArray = np.zeros(n)
        self.s1: FloatArray = np.zeros(n)
        self.s2: FloatArray = np.zeros(n)
        self.k0 = [-1] * len(lookahead_hours)
        self.snaps: FloatArray = np.zeros((64, SNAPSHOT_FIELDS))
        self.slot: dict[int, int] = {}
        self.free: list[int] = list(range(63, -1, -1))
        self.dirty: dict[int, tuple[float, ...] | None] = {}
        self.flushes = 0

    def changed(self, dep: int, snapshot: tuple[float, ...] | None) -> None:
        """Deployment ``dep`` has a new snapshot (None: it left the cluster); applied lazily."""
        self.dirty[dep] = snapshot

    def _moments(self, snaps: FloatArray, times: FloatArray) -> tuple[FloatArray, FloatArray]:
        if snaps.shape[0] == 0:
            return np.zeros(times.shape), np.zeros(times.shape)
        m, v = size_moments(snaps, times, self.nu, self.alpha)
        return m.sum(axis=0), v.sum(axis=0)

    def _live(self) -> FloatArray:
        rows = np.fromiter(self.slot.values(), dtype=np.int64, count=len(self.slot))
        out: FloatArray = self.snaps[rows]
        return out

    def _slide(self, t: float, full: bool) -> None:
        live = self._live()
        for i, h in enumerate(self.step_hours):
            k0 = math.floor(t / h) + 1
            delta = k0 - self.k0[i]
            if delta <= 0 and not full:
                continue
            lo = i * self.steps
            hi = lo + self.steps
            self.times[lo:hi] = (k0 + np.arange(self.steps)) * h
            if full or self.k0[i] < 0 or delta >= self.steps:
                self.s1[lo:hi], self.s2[lo:hi] = self._moments(live, self.times[lo:hi])
            else:
                keep = self.steps - delta
                self.s1[lo : lo + keep] = self.s1[lo + delta : hi].copy()
                self.s2[lo : lo + keep] = self.s2[lo + delta : hi].copy()
                new = self.times[lo + keep : hi]
                self.s1[lo + keep : hi], self.s2[lo + keep : hi] = self._moments(live, new)
            self.k0[i] = k0

    def _apply_dirty(self, extra: tuple[float, ...] | None) -> tuple[FloatArray, FloatArray]:
        """Swap pending snapshots into the sums; returns the moments of ``extra`` (one call).

        The old snapshots (weight -1), the new ones (+1) and the arriving deployment are stacked
        into one evaluation: per arrival the cost is one vectorised call, not one per deployment.
        """
        old_rows = [self.slot[d] for d in self.dirty if d in self.slot]
        stacked = [self.snaps[old_rows]]
        weights = [-1.0] * len(old_rows)
        new_rows: list[int] = []
        for dep, snap in self.dirty.items():
            row = self.slot.get(dep)
            if snap is None:
                if row is not None:
                    del self.slot[dep]
                    self.free.append(row)
                continue
            if row is None:
                row = self._allocate(dep)
            self.snaps[row] = snap
            new_rows.append(row)
        self.dirty.clear()
        stacked.append(self.snaps[new_rows])
        weights += [1.0] * len(new_rows)
        if extra is not None:
            stacked.append(np.asarray([extra]))
        rows = np.vstack(stacked)
        if rows.shape[0] == 0:
            return np.zeros(self.times.shape), np.zeros(self.times.shape)
        m, v = size_moments(rows, self.times, self.nu, self.alpha)
        if weights:
            w = np.asarray(weights)
            self.s1 += w @ m[: len(w)]
            self.s2 += w @ v[: len(w)]
        if extra is None:
            return np.zeros(self.times.shape), np.zeros(self.times.shape)
        return m[-1], v[-1]

    def _allocate(self, dep: int) -> int:
        if not self.free:
            size = self.snaps.shape[0]
            self.snaps = np.vstack([self.snaps, np.zeros((size, SNAPSHOT_FIELDS))])
            self.free = list(range(2 * size - 1, size - 1, -1))
        row = self.free.pop()
        self.slot[dep] = row
        return row

    def flush(self, t: float, extra: tuple[float, ...] | None) -> tuple[FloatArray, FloatArray]:
        """Bring the sums to time ``t`` (slide the windows, apply pending snapshots); returns the
        moments of ``extra`` on the windows."""
        self.flushes += 1
        if self.naive or self.flushes % _REFRESH_EVERY == 0:
            for dep, snap in list(self.dirty.items()):
                if snap is None:
                    if dep in self.slot:
                        self.free.append(self.slot.pop(dep))
                else:
                    row = self.slot.get(dep)
                    self.snaps[self._allocate(dep) if row is None else row] = snap
            self.dirty.clear()
            self._slide(t, full=True)
            if extra is None:
                return np.zeros(self.times.shape), np.zeros(self.times.shape)
            m, v = size_moments(np.asarray([extra]), self.times, self.nu, self.alpha)
            return m[0], v[0]
        self._slide(t, full=False)
        return self._apply_dirty(extra)

    def admits(
        self,
        snapshot: tuple[float, ...],
        t: float,
        policy: str,
        threshold: float,
        cores: int,
        marginal_cores: float,
    ) -> bool:
        """Would the policy accept a deployment with this snapshot now (seed 004 Defs. 4.2, 4.4, 6.1)?"""
        m, v = self.flush(t, snapshot)
        mean = self.s1 + m
        if policy.startswith("first"):
            ok = mean < threshold * cores
        else:
            var = np.maximum(self.s2 + v, 0.0)
            slack = cores - mean
            # Cantelli: P(N >= C) <= Var / (Var + (C - E)^2) when E < C
            with np.errstate(divide="ignore", invalid="ignore"):
                bound = np.where(slack > 0, var / (var + slack * slack), 1.0)
            ok = bound < threshold
        if policy.endswith("marginal"):
            ok = ok | (m < marginal_cores)
        return bool(ok.all())

"""The cluster's summed moments on the look-ahead grids, kept up to date per event.

Cluster Admission §5.2 splits each moment policy into sub-policies with look-ahead horizons of 3 years,
1 year, 1 month, 1 week and 24 hours, each discretised into 600 steps. Here a sub-policy's steps sit
on an absolute grid ``k * h`` (``h`` = horizon / steps); at time ``t`` its window is the ``steps``
grid points after ``t``. Each deployment's contribution (mean and variance of its size at each
point) is a function of its belief snapshot taken at its last event, so the sums over deployments
change only when (a) a deployment has an event — its old contribution is subtracted and the new
one added, over the window only — or (b) the window slides onto new grid points, which are
evaluated once for every deployment. Per arrival that is O(changed deployments x grid + deployments
x new points) instead of O(deployments x grid) (``naive=True`` does the latter, for the benchmark).
Most arrivals are rejected, and at the grid point that rejected the one before: :meth:`admits`
checks that point first in scalar arithmetic, exactly (``docs/admission.md``, quick rejection).
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import numpy.typing as npt

from tracelab.analysis.admission.model import (
    EXTENDED_FIELDS,
    FloatArray,
    extend_snapshot,
    point_moments,
    size_moments,
)

#: full recomputation every this many flushes so add/subtract rounding cannot accumulate
_REFRESH_EVERY = 2000
#: pending snapshots the quick rejection corrects for one by one before it flushes them (numpy)
_MAX_PENDING = 8
#: grid points remembered as the last rejections' worst ones
_CANDIDATES = 3
#: relative margin of the quick rejection over rounding differences of the two evaluations
_MARGIN = 1e-9


class SnapshotSource(Protocol):
    """A deployment whose belief snapshot is read when the sums need it, not at each event."""

    def snapshot(self) -> tuple[float, ...]: ...


class ClusterMoments:
    """Sum over admitted deployments of E[size] and Var[size] on every sub-policy's window.

    Columns are ring-ordered: grid point ``k`` of sub-policy ``i`` lives in column
    ``i * steps + k % steps``, so sliding a window rewrites only the columns of the new points (the
    policies test every point, so their order does not matter). Each deployment's contribution is
    stored per column, so an event subtracts the stored row instead of evaluating it again.
    """

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
        self.snaps: FloatArray = np.zeros((0, EXTENDED_FIELDS))
        self.c1: FloatArray = np.zeros((0, n))
        self.c2: FloatArray = np.zeros((0, n))
        self.slot: dict[int, int] = {}
        self.free: list[int] = []
        #: pending changes: an extended snapshot, a source to read one from, or None (left)
        self.dirty: dict[int, tuple[float, ...] | SnapshotSource | None] = {}
        self.flushes = 0
        self.candidates: list[int] = []
        self.quick_rejections = 0
        self.rule: _Rule | None = None
        #: per grid column: each pending snapshot's change of (s1, s2) there (quick rejection)
        self.corrections: dict[int, _Pending] = {}

    def changed(self, dep: int, snapshot: tuple[float, ...] | SnapshotSource | None) -> None:
        """Deployment ``dep`` has a new snapshot (None: it left the cluster); applied lazily.

        A :class:`SnapshotSource` is read only when the sums are next needed: a deployment has
        several events between two arrivals, and only the snapshot after its last one counts.
        The source must not change between its last ``changed`` call and that read (the
        simulator's beliefs change only at the deployment's own events, each reported here).
        """
        if dep in self.dirty:
            for pending in self.corrections.values():
                pending.drop(dep)
        if snapshot is None or isinstance(snapshot, tuple):
            self.dirty[dep] = None if snapshot is None else extend_snapshot(snapshot, self.alpha)
        else:
            self.dirty[dep] = snapshot

    def _pending(self, dep: int) -> tuple[float, ...] | None:
        """The extended snapshot pending for ``dep`` (read from its source once)."""
        value = self.dirty[dep]
        if value is None or isinstance(value, tuple):
            return value
        snap = self.dirty[dep] = extend_snapshot(value.snapshot(), self.alpha)
        return snap

    def _rows(self) -> npt.NDArray[np.int64]:
        return np.fromiter(self.slot.values(), dtype=np.int64, count=len(self.slot))

    def _fill(self, rows: npt.NDArray[np.int64], cols: npt.NDArray[np.int64]) -> None:
        """Evaluate the rows' contributions at the columns and rebuild those columns' sums."""
        if rows.size:
            m, v = size_moments(self.snaps[rows], self.times[cols], self.nu, self.alpha)
            self.c1[np.ix_(rows, cols)] = m
            self.c2[np.ix_(rows, cols)] = v
            self.s1[cols] = m.sum(axis=0)
            self.s2[cols] = v.sum(axis=0)
        else:
            self.s1[cols] = 0.0
            self.s2[cols] = 0.0

    def _set_times(self, t: float) -> None:
        for i, h in enumerate(self.step_hours):
            k0 = math.floor(t / h) + 1
            ks = np.arange(k0, k0 + self.steps, dtype=np.int64)
            self.times[i * self.steps + ks % self.steps] = ks * h
            self.k0[i] = k0

    def _slide(self, t: float, full: bool) -> None:
        new_cols: list[npt.NDArray[np.int64]] = []
        for i, h in enumerate(self.step_hours):
            k0 = math.floor(t / h) + 1
            old = self.k0[i]
            if k0 <= old and not full:
                continue
            first = k0 if full or old < 0 else max(old + self.steps, k0)
            ks = np.arange(first, k0 + self.steps, dtype=np.int64)
            cols = i * self.steps + ks % self.steps
            self.times[cols] = ks * h
            new_cols.append(cols)
            self.k0[i] = k0
        if new_cols:
            self._fill(self._rows(), np.concatenate(new_cols))

    def _apply_dirty(self, extra: tuple[float, ...] | None) -> tuple[FloatArray, FloatArray]:
        """Swap pending snapshots into the sums; returns the moments of ``extra``.

        The old contributions are stored; the new ones and the arriving deployment are evaluated
        in one vectorised call.
        """
        slot = self.slot
        old_rows = [slot[d] for d in self.dirty if d in slot]
        if old_rows:
            self.s1 -= self.c1[old_rows].sum(axis=0)
            self.s2 -= self.c2[old_rows].sum(axis=0)
        new_rows: list[int] = []
        snaps: list[tuple[float, ...]] = []
        for dep in self.dirty:
            snap = self._pending(dep)
            row = slot.get(dep)
            if snap is None:
                if row is not None:
                    del slot[dep]
                    self.free.append(row)
                continue
            new_rows.append(self._allocate(dep) if row is None else row)
            snaps.append(snap)
        self.dirty.clear()
        if extra is not None:
            snaps.append(extra)
        if not snaps:
            return np.zeros(self.times.shape), np.zeros(self.times.shape)
        # one array of every new snapshot (a row-by-row copy into self.snaps cost more)
        stacked = np.array(snaps, dtype=np.float64)
        if new_rows:
            self.snaps[new_rows] = stacked[: len(new_rows)]
        m, v = size_moments(stacked, self.times, self.nu, self.alpha)
        k = len(new_rows)
        if k:
            self.c1[new_rows] = m[:k]
            self.c2[new_rows] = v[:k]
            self.s1 += m[:k].sum(axis=0)
            self.s2 += v[:k].sum(axis=0)
        if extra is None:
            return np.zeros(self.times.shape), np.zeros(self.times.shape)
        return m[-1], v[-1]

    def _allocate(self, dep: int) -> int:
        if not self.free:
            size = self.snaps.shape[0]
            grow = max(size, 16)
            n = self.times.size
            self.snaps = np.vstack([self.snaps, np.zeros((grow, EXTENDED_FIELDS))])
            self.c1 = np.vstack([self.c1, np.zeros((grow, n))])
            self.c2 = np.vstack([self.c2, np.zeros((grow, n))])
            self.free = list(range(size + grow - 1, size - 1, -1))
        row = self.free.pop()
        self.slot[dep] = row
        return row

    def flush(self, t: float, extra: tuple[float, ...] | None) -> tuple[FloatArray, FloatArray]:
        """Bring the sums to time ``t`` (slide the windows, apply pending snapshots); returns the
        moments of ``extra`` (an :func:`extend_snapshot`) on the windows."""
        self.flushes += 1
        self.corrections.clear()
        if self.naive or self.flushes % _REFRESH_EVERY == 0:
            for dep in list(self.dirty):
                snap = self._pending(dep)
                if snap is None:
                    if dep in self.slot:
                        self.free.append(self.slot.pop(dep))
                else:
                    row = self.slot.get(dep)
                    row = self._allocate(dep) if row is None else row
                    self.snaps[row] = snap
            self.dirty.clear()
            if self.naive:
                # the direct method: every deployment's moments at every point, nothing stored
                self._set_times(t)
                rows = self.snaps[self._rows()]
                m, v = size_moments(rows, self.times, self.nu, self.alpha)
                self.s1, self.s2 = m.sum(axis=0), v.sum(axis=0)
            else:
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
        """Would the policy accept a deployment with this snapshot now (Cluster Admission Defs. 4.2, 4.4, 6.1)?"""
        key = (policy, threshold, cores, marginal_cores)
        if self.rule is None or self.rule.key != key:
            self.rule = _Rule(*key)
        rule = self.rule
        extra = extend_snapshot(snapshot, self.alpha)
        # with many pending snapshots one flush that also evaluates the arrival costs less than
        # correcting a remembered point for each of them (the quick path's exact test)
        quick = not self.naive and len(self.dirty) <= _MAX_PENDING
        if quick and self._quick_reject(extra, t, rule):
            return False
        m, v = self.flush(t, extra)
        score = rule.scores(self.s1 + m, np.maximum(self.s2 + v, 0.0), m)
        worst = int(np.argmax(score))
        if score[worst] < 0.0:
            return True
        # most arrivals in a row are rejected at the same grid point: try it first next time
        if worst in self.candidates:
            self.candidates.remove(worst)
        self.candidates.insert(0, worst)
        del self.candidates[_CANDIDATES:]
        return False

    def _quick_reject(self, extra: tuple[float, ...], t: float, rule: _Rule) -> bool:
        """Exact early rejection: the policy fails clearly at one remembered grid point.

        One violated point suffices to reject, so the arriving deployment and the pending
        snapshots are evaluated there only, in scalar arithmetic, without sliding the windows (a
        column not yet slid still holds a point of the current window or is skipped). "Clearly"
        (a relative margin far above rounding) keeps the decision the full evaluation's.
        """
        for col in self.candidates:
            i = col // self.steps
            h = float(self.step_hours[i])
            when = float(self.times[col])
            if self.k0[i] < 0 or round(when / h) < math.floor(t / h) + 1:
                continue
            s1, s2 = self._pending_sums(col, when)
            # the arriving deployment only adds mean and variance (both >= 0), so a point the
            # cluster fails without it is failed with it (not so with the marginal heuristic)
            if not rule.marginal and rule.clearly_violated(s1, max(s2, 0.0), 0.0):
                self.quick_rejections += 1
                return True
            m, v = point_moments(extra, when, self.nu, self.alpha)
            if rule.clearly_violated(s1 + m, max(s2 + v, 0.0), m):
                self.quick_rejections += 1
                return True
        return False

    def _pending_sums(self, col: int, when: float) -> tuple[float, float]:
        """The sums at one column with the pending snapshots swapped in; each pending
        snapshot's change at the column is kept (and its total) until it changes again or the
        next flush, so an arrival with no new event since the last one costs no evaluation."""
        pending = self.corrections.get(col)
        if pending is None:
            pending = self.corrections[col] = _Pending()
        parts = pending.parts
        if len(parts) < len(self.dirty):
            for dep in self.dirty:
                if dep in parts:
                    continue
                snap = self._pending(dep)
                d1, d2 = point_moments(snap, when, self.nu, self.alpha) if snap else (0.0, 0.0)
                row = self.slot.get(dep)
                if row is not None:
                    d1 -= float(self.c1[row, col])
                    d2 -= float(self.c2[row, col])
                parts[dep] = (d1, d2)
                pending.d1 += d1
                pending.d2 += d2
        return float(self.s1[col]) + pending.d1, float(self.s2[col]) + pending.d2


class _Pending:
    """The pending snapshots' changes of (s1, s2) at one grid column, per deployment and summed."""

    __slots__ = ("d1", "d2", "parts")

    def __init__(self) -> None:
        self.parts: dict[int, tuple[float, float]] = {}
        self.d1 = 0.0
        self.d2 = 0.0

    def drop(self, dep: int) -> None:
        part = self.parts.pop(dep, None)
        if part is not None:
            self.d1 -= part[0]
            self.d2 -= part[1]


class _Rule:
    """A moment policy's acceptance condition at one look-ahead point."""

    __slots__ = ("first", "key", "limit", "marginal", "marginal_cores", "threshold")

    def __init__(self, policy: str, threshold: float, cores: int, marginal_cores: float) -> None:
        self.key = (policy, threshold, cores, marginal_cores)
        self.first = policy.startswith("first")
        self.marginal = policy.endswith("marginal")
        self.threshold = threshold
        self.limit = float(cores)
        self.marginal_cores = marginal_cores

    def scores(self, mean: FloatArray, var: FloatArray, m: FloatArray) -> FloatArray:
        """Per point: >= 0 where the condition fails (the larger, the worse), < 0 where it holds."""
        if self.first:
            score = mean - self.threshold * self.limit
        else:
            slack = self.limit - mean
            # Cantelli: P(N >= C) <= Var / (Var + (C - E)^2) when E < C
            with np.errstate(divide="ignore", invalid="ignore"):
                bound = np.where(slack > 0, var / (var + slack * slack), 1.0)
            score = np.where(bound < self.threshold, -1.0, bound - self.threshold)
        if self.marginal:
            # §6: a deployment expected below marginal_cores at the point is accepted there
            score = np.where(m < self.marginal_cores, -1.0, score)
        out: FloatArray = np.where(score >= 0.0, np.maximum(score, 0.0), -1.0)
        return out

    def clearly_violated(self, mean: float, var: float, m: float) -> bool:
        """The condition fails at a point by far more than rounding (relative 1e-9)."""
        if self.marginal and m < self.marginal_cores * (1.0 + _MARGIN) + _MARGIN:
            return False
        if self.first:
            return mean >= self.threshold * self.limit * (1.0 + _MARGIN) + _MARGIN
        slack = self.limit - mean
        if slack <= -_MARGIN * self.limit:
            return True
        if slack <= _MARGIN * self.limit:
            return False
        return var / (var + slack * slack) >= self.threshold * (1.0 + _MARGIN) + 1e-300

"""§2.1: box statistics by hand, sampling without replacement, spread shrinking as 1/sqrt(k)."""

from __future__ import annotations

import numpy as np
import pytest

from tracelab.analysis.statistics.inst_vs_avg import box_stats, inst_avg_convergence
from tracelab.analysis.statistics.task_samples import task_sample_batch


def test_box_stats_by_hand() -> None:
    # 1..9 and an outlier 100: numpy "linear" quartiles at positions 2.25, 4.5, 6.75
    b = box_stats([*range(1, 10), 100])
    assert (b.q1, b.median, b.q3) == pytest.approx((3.25, 5.5, 7.75))
    # upper fence 7.75 + 1.5 * 4.5 = 14.5: 100 is an outlier, the whisker stops at 9
    assert (b.whisker_low, b.whisker_high, b.n_outliers) == (1.0, 9.0, 1)
    assert b.n == 10


def _permuted_tasks(
    n_tasks: int, length: int, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    # inst is a permutation of avg: the full inst mean equals ȳ exactly
    rng = np.random.default_rng(seed)
    avg = [rng.gamma(4.0, 0.05, length) for _ in range(n_tasks)]
    inst = [rng.permutation(a) for a in avg]
    return inst, avg


def test_k_equal_to_length_gives_zero_without_replacement() -> None:
    inst, avg = _permuted_tasks(50, 40, seed=1)
    batch = task_sample_batch([(1, i) for i in range(50)], inst, avg)
    result = inst_avg_convergence([batch], ks=(40, 41), seed=3)
    # all 40 windows drawn without replacement: x̄ = ȳ for every task (with replacement it would not)
    assert result.boxes[0].n == 50
    assert max(abs(result.boxes[0].whisker_low), abs(result.boxes[0].whisker_high)) < 1e-12
    assert result.boxes[1].n == 0  # nobody has 41 windows


def test_spread_matches_sampling_theory() -> None:
    n_tasks, length = 3000, 400
    inst, avg = _permuted_tasks(n_tasks, length, seed=2)
    batch = task_sample_batch([(7, i) for i in range(n_tasks)], inst, avg)
    ks = (5, 50, 200)
    result = inst_avg_convergence([batch], ks=ks, seed=11)
    # Gamma(4, 0.05): cv = 1/2; mean of k draws without replacement from T: sd = cv/sqrt(k) *
    # sqrt((T-k)/(T-1)); relative differences ~ normal, IQR = 2 * 0.6745 * sd
    for k, box in zip(ks, result.boxes, strict=True):
        sd = 0.5 / np.sqrt(k) * np.sqrt((length - k) / (length - 1))
        assert box.q3 - box.q1 == pytest.approx(2 * 0.6745 * sd, rel=0.12)
        # unbiased: the median is within 4 standard errors of 0
        assert abs(box.median) < 4 * 1.25 * sd / np.sqrt(n_tasks)
    assert result.n_tasks == n_tasks
    assert result.n_zero_avg == 0


def test_reproducible_and_zero_avg_counted() -> None:
    inst, avg = _permuted_tasks(20, 30, seed=4)
    avg[0] = np.zeros(30)
    batch = task_sample_batch([(1, i) for i in range(20)], inst, avg)
    a = inst_avg_convergence([batch], ks=(1, 10), seed=5)
    b = inst_avg_convergence([batch], ks=(1, 10), seed=5)
    c = inst_avg_convergence([batch], ks=(1, 10), seed=6)
    assert a == b
    assert a.boxes[1] != c.boxes[1]
    assert a.n_zero_avg == 1
    assert a.boxes[0].n == 19
    assert a.table().height == 2

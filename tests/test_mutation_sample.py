"""`make mutation-sample`'s drawing (tests/mutation_sample.py) on hand-made mutant names."""

from collections import Counter

import pytest
from mutation_sample import allocation, function_of, stratified_sample


def _names(function: str, count: int) -> list[str]:
    return [f"tracelab.m.{function}__mutmut_{i}" for i in range(1, count + 1)]


def test_function_of_drops_only_the_mutant_number() -> None:
    assert function_of("tracelab.a.stage.x_f__mutmut_12") == "tracelab.a.stage.x_f"
    assert function_of("tracelab.a.stage.xǁCǁm__mutmut_3") == "tracelab.a.stage.xǁCǁm"
    with pytest.raises(ValueError, match="not a mutmut mutant name"):
        function_of("tracelab.a.stage.x_f")


def test_each_function_gets_one_and_the_rest_by_largest_remainder() -> None:
    # 6 of 10 + 5 + 1: one each leaves 3 for the 9 + 4 + 0 = 13 beyond the first, quotas
    # 27/13 = 2.08, 12/13 = 0.92 and 0: floors give a 1 + 2, b 1 + 0, c 1 (5), and the one left
    # goes to the largest remainder, b's 0.92
    assert allocation({"a": 10, "b": 5, "c": 1}, 6) == {"a": 3, "b": 2, "c": 1}
    # every mutant when the sample is the whole set
    assert allocation({"a": 10, "b": 5, "c": 1}, 16) == {"a": 10, "b": 5, "c": 1}
    with pytest.raises(ValueError, match="one of each"):
        allocation({"a": 10, "b": 5, "c": 1}, 2)


def test_sample_is_stratified_and_repeats_from_the_names_alone() -> None:
    mutants = _names("x_a", 10) + _names("x_b", 5) + _names("x_c", 1)
    sample = stratified_sample(mutants, size=6, seed="s")
    assert Counter(function_of(m) for m in sample) == {
        "tracelab.m.x_a": 3,
        "tracelab.m.x_b": 2,
        "tracelab.m.x_c": 1,
    }
    assert set(sample) <= set(mutants)
    assert len(set(sample)) == 6
    # the input's order does not matter, the seed does
    assert stratified_sample(mutants[::-1], size=6, seed="s") == sample
    assert any(stratified_sample(mutants, size=6, seed=s) != sample for s in ("t", "u", "v"))

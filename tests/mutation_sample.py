"""`make mutation-sample`: draw `make mutation`'s stratified sample from every generated mutant.

Not a test. With ``--generate`` first runs the generating phase of ``mutmut run`` (in
``build/mutation/``), then reads the mutant names mutmut wrote to the ``*.py.meta`` files under
``build/mutation/mutants/`` when it generated them, and prints ``SIZE`` of them, one a line.

The strata are the mutated functions: each gets one mutant, so no function goes unsampled however
small, and the other ``SIZE - functions`` are apportioned by largest remainder in proportion to
each function's mutants beyond that first one (so a function's share stays close to proportional
and never asks for more mutants than it has). Within a function the mutants are a
``random.Random(f"{SEED}-{function}").sample``, so the draw repeats from the names alone.
``tests/test_mutation_sample.py`` checks the drawing on hand-made names.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import sys
from collections import defaultdict
from pathlib import Path

SIZE = 300
SEED = "stage-mutants"
_MUTANT = re.compile(r"^(?P<function>.+)__mutmut_\d+$")


def function_of(mutant: str) -> str:
    """``tracelab.m.x_f__mutmut_3`` → ``tracelab.m.x_f`` (a method's class stays in the name)."""
    match = _MUTANT.match(mutant)
    if match is None:
        raise ValueError(f"{mutant!r} is not a mutmut mutant name")
    return match["function"]


def allocation(sizes: dict[str, int], size: int) -> dict[str, int]:
    """Mutants to draw per function: one each, the rest by largest remainder on ``n_f - 1``
    (ties to the function name that sorts first)."""
    if size < len(sizes) or size > sum(sizes.values()):
        raise ValueError(f"a sample of {size} cannot take one of each of {len(sizes)} functions")
    extra = size - len(sizes)
    spare = sum(n - 1 for n in sizes.values())
    quotas = {f: extra * (n - 1) / spare if spare else 0.0 for f, n in sizes.items()}
    counts = {f: 1 + int(q) for f, q in quotas.items()}
    left = size - sum(counts.values())
    by_remainder = sorted(sizes, key=lambda f: (-(quotas[f] - int(quotas[f])), f))
    for f in by_remainder[:left]:
        counts[f] += 1
    return counts


def stratified_sample(mutants: list[str], size: int = SIZE, seed: str = SEED) -> list[str]:
    """The sample, sorted; the same names and arguments always give the same sample."""
    by_function: dict[str, list[str]] = defaultdict(list)
    for mutant in sorted(set(mutants)):
        by_function[function_of(mutant)].append(mutant)
    counts = allocation({f: len(ms) for f, ms in by_function.items()}, size)
    drawn: list[str] = []
    for function, names in sorted(by_function.items()):
        drawn += random.Random(f"{seed}-{function}").sample(names, counts[function])
    return sorted(drawn)


def generated_mutants(mutants_dir: Path) -> list[str]:
    """Every mutant name in mutmut's ``.meta`` files (written when it generates the mutants)."""
    names: list[str] = []
    for meta in sorted(mutants_dir.rglob("*.py.meta")):
        names += json.loads(meta.read_text())["exit_code_by_key"]
    return names


def generate_mutants() -> None:
    """The first phase of ``mutmut run`` (mutmut 3.8.1's own functions, run in the mutation tree):
    write every mutant and its ``.meta`` file, and run no test."""
    # here, not at the top: the drawing and its test need no mutmut
    import mutmut.__main__ as mutmut

    mutmut.set_mutant_under_test("mutant_generation")
    Path("mutants").mkdir(exist_ok=True)
    mutmut.copy_src_dir()
    mutmut.copy_also_copy_files()
    mutmut.setup_source_paths()
    mutmut.store_lines_covered_by_tests()
    mutmut.create_mutants(2)


if __name__ == "__main__":
    if sys.argv[1] == "--generate":
        # mutmut prints each file it copies: keep stdout for the names
        with contextlib.redirect_stdout(sys.stderr):
            generate_mutants()
    print("\n".join(stratified_sample(generated_mutants(Path(sys.argv[-1])))))

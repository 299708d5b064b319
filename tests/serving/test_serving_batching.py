"""`length_groups` (serving/models/batching.py): the endpoint's length-sorted sub-batches.

The real-server side (the endpoint answers the same with and without the split) is in test_serving_server.py.
"""

from __future__ import annotations

import itertools
import random

import pytest

from serving.models.batching import length_groups  # the file `build` copies beside model.py


def _cost(groups: list[tuple[list[int], int]], overhead: float) -> float:
    return sum(overhead + len(rows) * length for rows, length in groups)


def _best_by_brute_force(lengths: list[int], overhead: float) -> float:
    """Every cut of the sorted lengths into contiguous groups (what an optimal grouping must be one of)."""
    ordered = sorted(lengths)
    n = len(ordered)
    best = float("inf")
    for cuts in itertools.product([False, True], repeat=n - 1):
        groups, start = [], 0
        for i, cut in enumerate([*cuts, True]):
            if cut:
                groups.append((list(range(start, i + 1)), ordered[i]))
                start = i + 1
        best = min(best, _cost(groups, overhead))
    return best


def test_without_an_overhead_the_batch_is_one_padded_call() -> None:
    assert length_groups([3, 40, 7], None) == [([0, 1, 2], 40)]
    assert length_groups([], 8.0) == [([], 0)]


def test_a_short_text_is_not_padded_to_a_long_ones_length_when_a_call_costs_less() -> None:
    groups = length_groups([60, 5, 5, 5], overhead=10.0)
    assert groups == [([1, 2, 3], 5), ([0], 60)]
    # A call dearer than the padding it saves: one batch.
    [(rows, length)] = length_groups([60, 5, 5, 5], overhead=200.0)
    assert sorted(rows) == [0, 1, 2, 3] and length == 60


def test_lengths_round_up_to_the_multiple() -> None:
    groups = length_groups([1, 17, 33], overhead=0.0, multiple=16)
    assert groups == [([0], 16), ([1], 32), ([2], 48)]


@pytest.mark.parametrize("seed", range(40))
def test_groups_cover_each_row_once_and_cost_no_more_than_the_best_cut(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [rng.randint(1, 128) for _ in range(rng.randint(1, 10))]
    overhead = rng.choice([0.0, 4.0, 16.0, 64.0, 500.0])
    groups = length_groups(lengths, overhead)
    assert sorted(i for rows, _ in groups for i in rows) == list(range(len(lengths)))
    for rows, length in groups:
        assert length == max(lengths[i] for i in rows)
    assert _cost(groups, overhead) == pytest.approx(_best_by_brute_force(lengths, overhead))
    assert _cost(groups, overhead) <= overhead + len(lengths) * max(lengths)

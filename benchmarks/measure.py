# Copyright The OpenTelemetry Authors
# SPDX-License-Identifier: Apache-2.0

"""Timing: every configuration in each round, in a shuffled order, so that a slow moment
of a shared machine hits them alike; the best round of each is its cost.

Only ratios within one run are compared: absolute times drift with the machine's load,
and in the emulated guest they mean nothing.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable, Sequence

from benchmarks.configs import Setup


def measure(
    make: Callable[[str], Setup], keys: Sequence[str], n: int, rounds: int, seed: int = 5
) -> dict[str, list[float]]:
    """Nanoseconds per operation of each configuration, one sample per round."""
    setups = {key: make(key) for key in keys}
    samples: dict[str, list[float]] = {key: [] for key in keys}
    order = list(keys)
    shuffle = random.Random(seed).shuffle
    try:
        for setup in setups.values():  # warm up: caches, first registrations, imports
            setup.run(max(n // 10, 1))
        for _ in range(rounds):
            shuffle(order)
            for key in order:
                samples[key].append(_time(setups[key], n))
    finally:
        for setup in setups.values():
            setup.close()
    return samples


def calling(key: str, call: Callable[..., object], *args: object) -> Setup:
    """A configuration whose operation is one ``call(*args)``: for timing a function alone."""

    def run(n: int) -> None:
        for _ in range(n):
            call(*args)

    return Setup(key, run)


def _time(setup: Setup, n: int) -> float:
    gc.collect()
    gc.disable()  # as timeit does: a collection lands on whichever configuration runs then
    try:
        start = time.perf_counter_ns()
        setup.run(n)
        return (time.perf_counter_ns() - start) / n
    finally:
        gc.enable()


def summary(samples: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Best and median nanoseconds per operation of each configuration."""
    return {
        key: {"best": min(values), "median": statistics.median(values), "rounds": len(values)}
        for key, values in samples.items()
    }

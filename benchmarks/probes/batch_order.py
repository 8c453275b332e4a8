"""Probe: the cost of the one batch order (an epoch plan's batches) against its floor, a bare permutation.

An epoch of ``--samples`` samples in batches of ``--batch-size``: the floor draws one numpy permutation and cuts
it (what 0.2's cursor did per epoch); the plan computes the same epoch's batches (natural, then class-balanced
over 8 classes, then two ranks); a token-budget plan builds its batches once (sort + ``batch_by_size``) and then
serves an epoch's order. Timings through ``benchmarks/measure.py`` (best of ``--repeat``); ratios to the floor.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.measure import best_of
from consumer.training.plan import EpochPlan
from consumer.util.seeds import generator

NAME = "batch_order"
DESCRIPTION = "an epoch plan's batches (natural, balanced, ranks, token budget) against a bare permutation"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=5)


def run(args: argparse.Namespace) -> dict:
    """Seconds per epoch of each order and its ratio to the floor."""
    n, b = args.samples, args.batch_size
    classes = [f"c{i}" for i in range(8)]
    sample_class = (np.arange(n) % 8).astype(np.int64)
    lengths = generator(0, "ties").integers(1, 512, size=n)

    def floor() -> None:
        order = generator(0, "epoch", 1).permutation(n)
        [order[i:i + b] for i in range(0, n, b)]

    plans = {
        "natural": EpochPlan(sample_class=sample_class, classes=classes, batch_size=b, seed=0),
        "balanced": EpochPlan(sample_class=sample_class, classes=classes, batch_size=b, seed=0, balance="uniform"),
        "rank_1_of_2": EpochPlan(sample_class=sample_class, classes=classes, batch_size=b, seed=0, rank=1,
                                 world_size=2),
    }
    out: dict = {"samples": n, "batch_size": b, "floor_s": best_of(floor, args.repeat)}
    for name, plan in plans.items():
        out[f"{name}_s"] = best_of(lambda p=plan: p.batches(1), args.repeat)
    budget = EpochPlan(sample_class=sample_class, classes=classes, batch_size=None, seed=0, lengths=lengths,
                       max_tokens=32 * 512)
    out["token_budget_build_s"] = best_of(lambda: EpochPlan(
        sample_class=sample_class, classes=classes, batch_size=None, seed=0, lengths=lengths,
        max_tokens=32 * 512).batches(0), 1)
    out["token_budget_s"] = best_of(lambda: budget.batches(1), args.repeat)
    for key in [k for k in out if k.endswith("_s") and k != "floor_s"]:
        out[key.replace("_s", "_vs_floor")] = round(out[key] / out["floor_s"], 2)
    return out


if __name__ == "__main__":
    import json

    p = argparse.ArgumentParser(description=DESCRIPTION)
    add_arguments(p)
    print(json.dumps(run(p.parse_args()), indent=1))

"""A mixture's weights as a schedule of the global step (issue #37).

``weights`` may be:

- ``None``: natural weights, each part in proportion to its samples (constant);
- a dict ``{part: weight}``: constant weights (normalised to sum 1; parts left out get 0);
- a list of ``(step, dict)`` points: piecewise constant, point ``i``'s weights from its step until the next point's
  step. The first point must be at step 0 and steps must increase strictly;
- a callable ``step -> dict``: evaluated (and checked) at every step the plan computes, so it must be a pure
  function of the step (a run resumed from a state evaluates it again from the resumed step on).

A callable that does not pickle (a lambda, a closure) is pickled as :class:`DetachedWeights`: its name and its
weights at step 0. The copy (in a ``spawn`` worker, say) fetches samples, which is all a worker does; planning steps
with it raises :class:`~consumer.errors.InputError` naming the callable.

Every dict is checked as ``consumer.mix`` checks static weights (negative, NaN, inf, all zero, unknown part, or
weight on a part without samples are refused, naming the part and value); the message of a schedule's dict also
names its step. :meth:`WeightSchedule.at` returns the normalised weights of a step as a float64 vector in the
order of the parts.
"""

from __future__ import annotations

import bisect
import pickle
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import InputError, short_repr
from .checks import check_weights

__all__ = ["DetachedWeights", "WeightSchedule"]


def _at_step(weights: object, sizes: dict[str, int], step: int) -> dict[str, float]:
    """``check_weights`` of one dict of a schedule, its message prefixed with the step."""
    if not isinstance(weights, Mapping):
        raise InputError(f"weights at step {step} must be a dict {{part: weight}}, got {short_repr(weights)}")
    try:
        out = check_weights(weights, sizes)
    except InputError as e:
        raise InputError(f"weights at step {step}: {e}") from None
    assert out is not None
    return out


class DetachedWeights:
    """What a pickle keeps of a callable schedule that does not pickle: its ``name`` and its weights at step 0."""

    def __init__(self, name: str, first: dict[str, float]):
        self.name, self.first = name, dict(first)


class WeightSchedule:
    """The checked weights of a mixture, as a function of the global step (see the module docstring).

    Attributes: ``kind`` (``"natural"``, ``"static"``, ``"points"`` or ``"callable"``), ``given`` (the weights as
    given, for pickling), ``static`` (the normalised dict when the weights never change, else ``None``),
    ``points`` (``[(step, normalised dict)]`` of a static, natural or piecewise schedule)."""

    def __init__(self, weights: object, sizes: dict[str, int]):
        self.parts = list(sizes)
        self.sizes = dict(sizes)
        self.given = weights
        self._fn: Callable[[int], object] | None = None
        self.points: list[tuple[int, dict[str, float]]] = []
        if weights is None:
            self.kind = "natural"
            total = sum(sizes.values())
            if total <= 0:
                raise InputError("the parts have no samples: natural weights need at least one")
            self.points = [(0, {p: n / total for p, n in sizes.items()})]
        elif isinstance(weights, Mapping):
            self.kind = "static"
            normalised = check_weights(weights, sizes)
            assert normalised is not None
            self.points = [(0, normalised)]
        elif isinstance(weights, (list, tuple)):
            self.kind = "points"
            self.points = self._check_points(weights)
        elif isinstance(weights, DetachedWeights):
            self.kind = "detached"
            self.points = [(0, _at_step(weights.first, self.sizes, 0))]
        elif callable(weights):
            self.kind = "callable"
            self._fn = weights
            self.at(0)  # a bad schedule fails at mix(), not at the first batch
        else:
            raise InputError(f"weights must be None or a dict {{part: weight}}, a list of (step, dict) points or a "
                             f"callable step -> dict, got {short_repr(weights)}")
        self._vectors = [(s, np.array([w[p] for p in self.parts], dtype=np.float64)) for s, w in self.points]
        self._steps = [s for s, _ in self.points]

    def _check_points(self, points: list | tuple) -> list[tuple[int, dict[str, float]]]:
        if not points:
            raise InputError("weights as a list of (step, dict) points needs at least one point (at step 0)")
        out: list[tuple[int, dict[str, float]]] = []
        for i, point in enumerate(points):
            if not isinstance(point, (list, tuple)) or len(point) != 2:
                raise InputError(f"weights[{i}] must be a (step, dict) point, got {short_repr(point)}")
            step, w = point
            if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
                raise InputError(f"weights[{i}]: the step must be an int >= 0, got {short_repr(step)}")
            if i == 0 and step != 0:
                raise InputError(f"weights[0]: the first point must be at step 0, got step {short_repr(step)}")
            if out and int(step) <= out[-1][0]:
                raise InputError(f"weights[{i}]: steps must increase, got step {int(step)} after step {out[-1][0]}")
            out.append((int(step), _at_step(w, self.sizes, int(step))))
        return out

    def first(self) -> dict[str, float]:
        """The normalised weights of step 0."""
        return dict(self.points[0][1]) if self.points else self.weights_at(0)

    def for_pickle(self) -> Any:
        """The weights as given, or :class:`DetachedWeights` for a callable that does not pickle."""
        if self.kind != "callable":
            return self.given
        try:
            pickle.dumps(self.given)
        except Exception:  # noqa: BLE001  (a lambda or closure: PicklingError, AttributeError, TypeError)
            return DetachedWeights(str(self.describe()), self.first())
        return self.given

    @property
    def static(self) -> dict[str, float] | None:
        """The normalised weights when they never change (natural or a dict), else ``None``."""
        return dict(self.points[0][1]) if self.kind in ("natural", "static") else None

    def weights_at(self, step: int) -> dict[str, float]:
        """The normalised weights of global step ``step`` as ``{part: weight}``."""
        return dict(zip(self.parts, self.at(step).tolist()))

    def at(self, step: int) -> np.ndarray:
        """The normalised weights of global step ``step``: float64, one per part, in the parts' order."""
        if self.kind == "detached":
            assert isinstance(self.given, DetachedWeights)
            raise InputError(f"the weights were a {self.given.name} that does not pickle: this copy of the mixture "
                             "(made by pickle, as in a spawn worker) fetches samples but cannot plan steps; give a "
                             "module-level function to plan in it")
        if self._fn is not None:
            try:
                got = self._fn(int(step))
            except InputError:
                raise
            except Exception as e:  # noqa: BLE001  (the user's function: name the step it failed at)
                raise InputError(f"weights({step}) raised {type(e).__name__}: {e}") from e
            w = _at_step(got, self.sizes, int(step))
            return np.array([w[p] for p in self.parts], dtype=np.float64)
        return self._vectors[bisect.bisect_right(self._steps, step) - 1][1]

    def next_change(self, step: int) -> int | None:
        """The first step after ``step`` whose weights may differ (``None``: never; a callable: ``step + 1``)."""
        if self._fn is not None:
            return step + 1
        i = bisect.bisect_right(self._steps, step)
        return self._steps[i] if i < len(self._steps) else None

    def describe(self) -> Any:
        """JSON-able: the normalised dict (constant), the points ``[[step, dict], ...]``, or the callable's name."""
        if self.kind in ("natural", "static"):
            return dict(self.points[0][1])
        if self.kind == "points":
            return [[s, dict(w)] for s, w in self.points]
        if isinstance(self.given, DetachedWeights):
            return self.given.name
        fn = self._fn
        return f"callable {getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"

    def __repr__(self) -> str:
        return f"WeightSchedule({self.kind}: {short_repr(self.describe(), 200)})"

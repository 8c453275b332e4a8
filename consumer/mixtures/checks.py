"""The arguments of ``consumer.mix``, checked once: the parts (Consumers that agree on ``n_bytes``, vocabulary and
row width), the static weights, ``sampling``, ``num_samples`` and ``seed``. Every refusal is an :class:`InputError`
naming the argument (the parts, or the part) and echoing the bad value."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..consumer import Consumer
from ..errors import InputError, short_repr
from ..util.validate import check_int

__all__ = ["check_num_samples", "check_parts", "check_sampling", "check_seed", "check_weights"]

SAMPLINGS = (None, "megatron")  # None: our weighted order; "megatron": Megatron's blend (mixtures/blend.py)


def check_parts(parts: object) -> dict[str, Consumer]:
    """``parts`` as a dict ``{name: Consumer}``, at least one, names non-empty strings, and every part agreeing with
    the first on ``n_bytes``, the vocabulary and ``seqlen`` (else the two parts and their two values are named)."""
    if not isinstance(parts, Mapping):
        raise InputError(f"parts must be a dict {{name: Consumer}}, got {short_repr(parts)}")
    if not parts:
        raise InputError("parts must name at least one dataset, got an empty dict")
    out: dict[str, Consumer] = {}
    for name, part in parts.items():
        if not isinstance(name, str) or not name:
            raise InputError(f"parts: every name must be a non-empty string, got {short_repr(name)}")
        if not isinstance(part, Consumer):
            raise InputError(f"parts[{name!r}] must be a consumer.Consumer, got {type(part).__name__}: "
                             f"{short_repr(part)}")
        out[name] = part
    first, ref = next(iter(out.items()))
    for name, part in list(out.items())[1:]:
        for what, a, b in (("n_bytes", ref.vocab.n_bytes, part.vocab.n_bytes),
                           ("vocab", _vocab(ref), _vocab(part)),
                           ("seqlen", ref.seqlen, part.seqlen)):
            if a != b:
                raise InputError(f"parts {first!r} and {name!r} disagree on {what}: {first!r} has "
                                 f"{short_repr(a, 200)}, {name!r} has {short_repr(b, 200)} (the parts of a mixture "
                                 "must make rows alike)")
    return out


def _vocab(part: Consumer) -> tuple[str, dict]:
    """What identifies a part's vocabulary: its kind (byte tokens or a store's ids) and its description."""
    return type(part.vocab).__name__, part.vocab.to_dict()


def check_weights(weights: object, sizes: dict[str, int]) -> dict[str, float] | None:
    """One dict of weights normalised to sum 1 over every part (parts the dict leaves out get 0), or None (natural:
    proportional to the parts' sizes). Refused: unknown parts, weights that are not finite numbers >= 0, all zero,
    or positive on a part without samples (a schedule's dicts each come here: :mod:`consumer.mixtures.schedule`)."""
    if weights is None:
        return None
    if not isinstance(weights, Mapping):
        raise InputError(f"weights must be None or a dict {{part: weight}}, got {short_repr(weights)}")
    raw: dict[str, float] = {}
    for name, w in weights.items():
        if name not in sizes:
            raise InputError(f"weights name part {short_repr(name)} (weight {short_repr(w)}), which does not exist; "
                             f"parts are {list(sizes)}")
        if isinstance(w, (bool, np.bool_)) or not isinstance(w, (int, float, np.integer, np.floating)) or \
                not math.isfinite(float(w)) or float(w) < 0:
            raise InputError(f"weights[{name!r}] must be a finite number >= 0, got {short_repr(w)}")
        if float(w) > 0 and sizes[name] == 0:
            raise InputError(f"weights[{name!r}] is {short_repr(w)} but part {name!r} has no samples")
        raw[name] = float(w)
    total = sum(raw.values())
    if total <= 0:
        raise InputError(f"weights give every part weight 0: {short_repr(dict(weights), 200)}")
    return {name: raw.get(name, 0.0) / total for name in sizes}


def check_sampling(sampling: object) -> None:
    """``None`` (the weighted order of the loader) or ``"megatron"`` (Megatron's blend, :mod:`.blend`)."""
    if not isinstance(sampling, (str, type(None))) or sampling not in SAMPLINGS:
        raise InputError(f"sampling must be None or 'megatron' (Megatron's blend), got {short_repr(sampling)}")


def check_num_samples(num_samples: object) -> int | None:
    """``None`` or an int >= 1: the samples of an epoch drawn with the weights (default: the mixture's length)."""
    return None if num_samples is None else check_int("num_samples", num_samples, 1)


def check_seed(seed: object, parts: dict[str, Consumer]) -> int:
    """The mixture's seed: the given int >= 0, or the first part's."""
    if seed is None:
        return int(next(iter(parts.values())).seed)
    return check_int("seed", seed, 0)


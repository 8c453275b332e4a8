"""The default query of a dataset's bare selections: ``set_supervised_mode``, ``set_unsupervised_mode`` and
``set_mlm_mode`` (gperc's names), ``set_causal_mode`` and ``set_span_mode``, which ``Consumer`` inherits from
:class:`ModeMethods`. Each setter also keeps its objective's settings, which the preset queries use whatever the
default query is (``ds[sel, "causal"]`` scores what ``set_causal_mode(loss_on=...)`` chose)."""

from __future__ import annotations

import dataclasses

from .causal import DEFAULT_LOSS_ON, check_loss_on
from .columns import MaskConfig

__all__ = ["ModeMethods"]


class ModeMethods:
    """The mode setters of ``Consumer``: ``mode`` is the query of ``ds[selection]`` and ``get_next_batch()``,
    ``_mask`` the settings of the objectives (both set by ``Consumer._attach`` first)."""

    mode: str | None
    _mask: MaskConfig

    def set_supervised_mode(self) -> None:
        """Make ``"supervised"`` the default query of bare selections and ``get_next_batch()``."""
        self.mode = "supervised"

    def set_unsupervised_mode(self, mask_frequency: float = 0.15, add_cls: bool = False,
                              mask_rule: str = "bert") -> None:
        """Masking (fraction, ``"bert"`` 80/10/10 or ``"mask"`` rule, CLS prefix); ``"unsupervised"`` by default."""
        self._mask = dataclasses.replace(self._mask, frequency=mask_frequency, rule=mask_rule, add_cls=add_cls)
        self.mode = "unsupervised"

    def set_mlm_mode(self, mask_frequency: float = 0.15, add_cls: bool = False, mask_rule: str = "bert") -> None:
        """Like :meth:`set_unsupervised_mode`, with ``"mlm"`` (input, attention mask, labels) as default."""
        self.set_unsupervised_mode(mask_frequency, add_cls, mask_rule)
        self.mode = "mlm"

    def set_causal_mode(self, loss_on: str | tuple[str, ...] = DEFAULT_LOSS_ON) -> None:
        """Next-token prediction (``"causal"``: input, labels) by default; ``loss_on`` the kinds of next token that
        are scored, from ``("content", "eof", "header", "sep")`` (default content and EOF: docs/training.md)."""
        self._mask = dataclasses.replace(self._mask, loss_on=check_loss_on(loss_on), add_cls=False)
        self.mode = "causal"

    def set_span_mode(self, noise_density: float = 0.15, mean_span: float = 20.0) -> None:
        """ByT5's span corruption (``"span"``: inputs with sentinels, the spans as labels) by default, with T5's
        ``noise_density`` and mean span length (ByT5: 0.15 and 20 bytes)."""
        self._mask = dataclasses.replace(self._mask, noise_density=noise_density, mean_span=mean_span, add_cls=False)
        self.mode = "span"

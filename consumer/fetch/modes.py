"""The default query of a dataset's bare selections: ``set_supervised_mode``, ``set_unsupervised_mode`` and
``set_mlm_mode``, which ``Consumer`` inherits from :class:`ModeMethods` (gperc's names for them)."""

from __future__ import annotations

from .columns import MaskConfig

__all__ = ["ModeMethods"]


class ModeMethods:
    """The mode setters of ``Consumer``: ``mode`` is the query of ``ds[selection]`` and ``get_next_batch()``,
    ``_mask`` the masking of the unsupervised queries (both set by ``Consumer._attach`` first)."""

    mode: str | None
    _mask: MaskConfig

    def set_supervised_mode(self) -> None:
        """Make ``"supervised"`` the default query of bare selections and ``get_next_batch()``."""
        self.mode = "supervised"

    def set_unsupervised_mode(self, mask_frequency: float = 0.15, add_cls: bool = False,
                              mask_rule: str = "bert") -> None:
        """Masking (fraction, ``"bert"`` 80/10/10 or ``"mask"`` rule, CLS prefix); ``"unsupervised"`` by default."""
        self._mask = MaskConfig(frequency=mask_frequency, rule=mask_rule, add_cls=add_cls)
        self.mode = "unsupervised"

    def set_mlm_mode(self, mask_frequency: float = 0.15, add_cls: bool = False, mask_rule: str = "bert") -> None:
        """Like :meth:`set_unsupervised_mode`, with ``"mlm"`` (input, attention mask, labels) as default."""
        self.set_unsupervised_mode(mask_frequency, add_cls, mask_rule)
        self.mode = "mlm"

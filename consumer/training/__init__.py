"""Feeding torch training loops: batch orders (``sampler``), epoch plans for ranks and class balance
(``plan``), the resumable DataLoader (``loader``) and its shared-memory worker pool (``workers``).
"""

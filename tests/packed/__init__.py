"""Tests of consumer.packed."""

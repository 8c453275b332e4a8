"""Tests of consumer.dataset."""

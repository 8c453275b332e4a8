"""Tests of consumer.training."""

"""Tests of consumer.fetch."""

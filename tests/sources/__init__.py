"""Tests of consumer.sources."""

"""Tests of consumer.cli."""

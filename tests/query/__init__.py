"""Tests of consumer.query."""

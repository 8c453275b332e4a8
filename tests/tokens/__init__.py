"""Tests of consumer.tokens."""

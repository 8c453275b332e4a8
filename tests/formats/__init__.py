"""Tests of consumer.formats."""

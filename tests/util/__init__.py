"""Tests of consumer.util."""

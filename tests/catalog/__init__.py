"""Tests of consumer.catalog."""

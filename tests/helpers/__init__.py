"""Helpers the tests share: servers on 127.0.0.1, racing writers, many-process and rank workers."""

"""The store suite runs once per Zstandard backend (see tests/zstd_backends.py)."""

from zstd_backends import zstd_backend

__all__ = ["zstd_backend"]

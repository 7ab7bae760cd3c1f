"""The dsh on-disk session store, read exactly as upstream's JSONL persistence reads it."""

from .jsonl_store import JsonlSessionStore
from .layout import default_root, encode_segment, project_key

__all__ = ["JsonlSessionStore", "default_root", "encode_segment", "project_key"]

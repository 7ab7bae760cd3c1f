"""The URI vectors from upstream's specification (upstream-semantics, "Vectors"), defined once:
the unit tests check the port against them and the differential tests check upstream too."""

from __future__ import annotations

U = "dsh-session:ImFiYyI"
"""The canonical URI of the session ``abc``."""

URI_VECTORS = [
    ("", "dsh-session:IiI"),
    ("abc", "dsh-session:ImFiYyI"),
    ("s-001", "dsh-session:InMtMDAxIg"),
    ("source", "dsh-session:InNvdXJjZSI"),
    ("source]", "dsh-session:InNvdXJjZV0i"),
    ("target", "dsh-session:InRhcmdldCI"),
    (
        "0198c2a4-7b1e-7c3d-9f00-123456789abc",
        "dsh-session:IjAxOThjMmE0LTdiMWUtN2MzZC05ZjAwLTEyMzQ1Njc4OWFiYyI",
    ),
    ('unicode/引号"/slash\\/line\n', "dsh-session:InVuaWNvZGUv5byV5Y-3XCIvc2xhc2hcXC9saW5lXG4i"),
    ("\ud800", "dsh-session:Ilx1ZDgwMCI"),
]
"""``(session id, canonical URI)`` pairs."""

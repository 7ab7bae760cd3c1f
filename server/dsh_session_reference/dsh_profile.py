"""The budgets dsh itself uses: ``maxReferences``, ``candidateLimit`` and ``maxReferenceBytes`` as a
dsh profile configures its session-reference plugin, read from the profile's patch files.

dsh 0.1.0-rc.8 composes a profile's plugin tree from patch layers: the bundles' own (the ``web``
profile's ``@deepseek-ai/dsh-web-app`` inserts the row ``id: session-reference`` with no config, so
upstream's defaults), then the profile's ``$DSH_HOME/profiles/<profile>/cordis.patch.yml``, then the
home layer ``$DSH_HOME/cordis.patch.yml`` (``--patch`` overlays last, which only the command line
that started dsh knows). A patch ``{id: session-reference, config: {...}}`` replaces the row's whole
``config``, so the last layer that sets it decides every budget. This module reads those two user
layers the same way, with :mod:`.yaml_subset`: a value written as a ``!!js`` expression, or anything
but a plain number, is ignored with a warning, never evaluated. The files are untrusted input to
this process (the caller reads them bounded, see ``assembly.dsh_profile_budgets``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from .config import (
    DEFAULT_CANDIDATE_LIMIT,
    DEFAULT_MAX_REFERENCE_BYTES,
    DSH_DEFAULT,
    MAX_REFERENCES,
    ResolverConfig,
    clamp_budget,
    is_positive_safe_integer,
)
from .display import shortened

if TYPE_CHECKING:
    from .yaml_subset import JsExpression, OtherNumber

DEFAULT_PROFILE: Final = "web"
"""The profile ``dsh web`` boots, and the one that hosts session references out of the box."""
PATCH_FILENAME: Final = "cordis.patch.yml"
ROW_ID: Final = "session-reference"
PLUGIN: Final = "@deepseek-ai/dsh-session-reference"
BUDGET_KEYS: Final = ("maxReferences", "candidateLimit", "maxReferenceBytes")


def profile_name_problem(name: str) -> str | None:
    """Why dsh would refuse ``name`` as a profile (its ``resolveProfileDir`` rule), else ``None``:
    a name is one folder under ``$DSH_HOME/profiles``, never a path. A message quotes at most 80
    characters of it (a client may send megabytes, and each message is kept to be said once)."""
    shown = repr(shortened(name, 80))
    if name in ("", ".", "..", "node_modules") or "/" in name or "\\" in name or "\0" in name:
        return f"dsh: invalid profile name {shown}"
    if os.path.splitdrive(name)[0]:  # Windows: "C:x" joined to the home drops the home
        return f"dsh: invalid profile name {shown} (a drive, not a folder under the home)"
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (JSON's "\ud800"): no file name holds it
        return f"profile name {shown} is not text a file name can hold"
    if len(encoded) > 255:  # no file system's folder name is longer
        return f"profile name {shown} is longer than a folder name can be"
    return None


@dataclass(frozen=True)
class ProfileLayer:
    """One patch file: where it is, as a person reads it, and its text (``None``: absent)."""

    label: str
    text: str | None
    problem: str | None = None
    """Why it could not be read (too big, not UTF-8, not a regular file...)."""


@dataclass(frozen=True)
class ProfileBudgets:
    """What dsh's profile sets: each budget it sets as a plain number, where, and what was ignored."""

    values: Mapping[str, int] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    unknown: Mapping[str, str] = field(default_factory=dict)
    """Budgets whose dsh value this reader cannot know, and why (a ``!!js`` value, a file not
    read after the one that set it...): the Budgets block says so beside the value it shows."""


def _value_problem(key: str, value: object) -> str | None:
    from .yaml_subset import JsExpression, OtherNumber  # imported by budgets_from_layers already

    if isinstance(value, JsExpression):
        return "is a !!js expression, which is never evaluated here"
    if isinstance(value, OtherNumber):
        return f"is written as {str(value)!r}, a number form this reader does not read"
    if not is_positive_safe_integer(value):
        return "is not a plain positive integer (dsh refuses it too)"
    if key == "maxReferences" and value > MAX_REFERENCES:
        return f"is above {MAX_REFERENCES} (dsh refuses it too)"
    return None


def _truthy(value: object) -> bool:
    """JavaScript's truthiness of a YAML value, as dsh's patch code tests ``insert`` and ``name``:
    ``null``, ``false``, ``0``, ``NaN`` and ``""`` are false; every list and mapping (even empty) true."""
    if isinstance(value, list | dict):
        return True
    if isinstance(value, float) and value != value:
        return False
    return bool(value)


def budgets_from_layers(profile: str, layers: Sequence[ProfileLayer]) -> ProfileBudgets:
    """The session-reference row's config after ``layers`` (in dsh's order), as budgets."""
    if all(layer.text is None and layer.problem is None for layer in layers):
        return ProfileBudgets()  # no patch file (dsh's own setup): nothing to read
    # The YAML reader only for a patch file: the server reads the profile before it answers
    # ``initialize``, and most homes have none.
    from .yaml_subset import JsExpression, OtherNumber, YamlSubsetError, parse_yaml

    warnings: list[str] = []
    config: object = None
    decided_by: str | None = None
    unread: list[str] = []
    """Layers not read since the last one that set the row's config: any of them may set it."""
    for layer in layers:
        if layer.problem is not None:
            warnings.append(f"dsh profile {profile!r}: {layer.label}: {layer.problem}; not read")
            unread.append(layer.label)
            continue
        if layer.text is None:
            continue
        try:
            patches = parse_yaml(layer.text)
        except YamlSubsetError as error:
            warnings.append(f"dsh profile {profile!r}: {layer.label}: {error}; budgets from it are ignored")
            unread.append(layer.label)
            continue
        if not isinstance(patches, list) or not all(isinstance(patch, dict) for patch in patches):
            # dsh refuses an empty file too (js-yaml reads it as undefined), and a list with any
            # entry that is not a mapping: it does not start, so no budget of this file is its.
            warnings.append(
                f"dsh profile {profile!r}: {layer.label} is not a YAML list of patch mappings "
                "(dsh refuses it too)"
            )
            continue
        for patch in patches:
            inserted = patch.get("insert")
            if _truthy(inserted):  # dsh's test: any truthy insert makes an insert patch
                rows = (
                    [row for row in inserted if isinstance(row, dict)] if isinstance(inserted, list) else []
                )
                ours = [row for row in rows if row.get("id") == ROW_ID]
                if ours and _truthy(patch.get("id")):
                    said = f"dsh profile {profile!r}: {layer.label}: a {ROW_ID} row inserted into a group"
                    if not any(warning.startswith(said) for warning in warnings):  # once a file
                        warnings.append(f"{said}, which this reader does not follow; its budgets are ignored")
                    config, decided_by, unread = None, layer.label, [f"{layer.label} (a group insert)"]
                elif ours:
                    config, decided_by, unread = ours[-1].get("config"), layer.label, []
                continue
            if patch.get("id") != ROW_ID:
                continue
            name = patch.get("name")
            if _truthy(name) and name != PLUGIN:
                continue  # dsh skips a patch whose (non-empty) name differs from the row's
            if "config" in patch:
                config, decided_by, unread = patch["config"], layer.label, []
    values: dict[str, int] = {}
    origins: dict[str, str] = {}
    unknown: dict[str, str] = {}
    if unread:
        unknown = dict.fromkeys(BUDGET_KEYS, f"{', '.join(unread)} not read")
    if isinstance(config, JsExpression):
        warnings.append(
            f"dsh profile {profile!r}: {decided_by}: the {ROW_ID} config is a !!js expression, "
            "which is never evaluated here; its budgets are not known"
        )
        unknown = dict.fromkeys(BUDGET_KEYS, f"the {ROW_ID} config in {decided_by} is a !!js expression")
    elif isinstance(config, dict):
        for key in BUDGET_KEYS:
            if key not in config:
                continue
            problem = _value_problem(key, config[key])
            if problem is not None:
                warnings.append(f"dsh profile {profile!r}: {decided_by}: {key} {problem}; ignored")
                if isinstance(config[key], JsExpression | OtherNumber):  # dsh reads a number here
                    unknown.setdefault(key, f"it is {_form(config[key])} in {decided_by}")
                continue
            values[key] = int(config[key])
            origins[key] = f"dsh profile {profile!r} ({decided_by})"
    elif config is not None:
        warnings.append(
            f"dsh profile {profile!r}: {decided_by}: the {ROW_ID} config is not a mapping; ignored"
        )
    return ProfileBudgets(values, origins, tuple(warnings), unknown)


def _form(value: JsExpression | OtherNumber) -> str:
    """How a value this reader does not read is written, shortened for one line."""
    from .yaml_subset import JsExpression  # imported by budgets_from_layers already

    text = f"!!js {value.source}" if isinstance(value, JsExpression) else str(value)
    return repr(shortened(text, 40))


_DEFAULTS: Final = (MAX_REFERENCES, DEFAULT_CANDIDATE_LIMIT, DEFAULT_MAX_REFERENCE_BYTES)


def combine_limits(
    own: Mapping[str, tuple[int, str]], profile: ProfileBudgets, *, bounded: bool
) -> tuple[ResolverConfig, list[str]]:
    """Each budget from ``own`` (a flag or the editor's setting: value and where it came from),
    else dsh's ``profile``, else dsh's default, with its origin. ``bounded`` (the language server):
    a profile value above :data:`.config.BUDGET_BOUNDS` is clamped, with a warning; ``own`` values
    were checked by their front end already."""
    values: list[int] = []
    origins: list[str] = []
    warnings: list[str] = []
    for key, default in zip(BUDGET_KEYS, _DEFAULTS, strict=True):
        if key in own:
            value, origin = own[key]
        elif key in profile.values:
            value, origin = profile.values[key], profile.origins[key]
            clamped, why = clamp_budget(key, value) if bounded else (value, None)
            if why is not None and clamped is not None:
                warnings.append(f"{origin}: {why}; using {clamped:,}, so the preview may omit what dsh keeps")
                # The Budgets block must not say dsh's profile set the bound: it set more.
                origin = f"this server's bound, below the {value:,} of {origin}"
                value = clamped
        else:
            value, origin = default, DSH_DEFAULT
        if key not in own and key in profile.unknown:  # never a number dsh may not use, unqualified
            origin = f"{origin}, but dsh's may differ: {profile.unknown[key]}"
        values.append(value)
        origins.append(origin)
    return ResolverConfig(values[0], values[1], values[2], (origins[0], origins[1], origins[2])), warnings

"""dsh's budgets from its profile's patch files, read as dsh composes them and never run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_session_reference.config import DSH_DEFAULT, ResolverConfig
from dsh_session_reference.dsh_profile import (
    ProfileBudgets,
    ProfileLayer,
    budgets_from_layers,
    combine_limits,
    profile_name_problem,
)
from dsh_session_reference.uri import format_session_reference_mention
from dsh_session_reference.yaml_subset import JsExpression, OtherNumber, YamlSubsetError, parse_yaml

TEMPLATE = """\
# Your patch layer for this dsh profile, applied after every bundle layer:
# a top-level YAML array of loader patch entries (id-targeted config
# overrides, disables, and insert lists; `!!js` expressions allowed).
[]
"""
"""What dsh 0.1.0-rc.8 writes as a new profile's ``cordis.patch.yml`` (``PROFILE_PATCH_TEMPLATE``)."""

EDITED = """\
# Your patch layer for this dsh profile, applied after every bundle layer:
# a top-level YAML array of loader patch entries (id-targeted config
# overrides, disables, and insert lists; `!!js` expressions allowed).

# A persona of our own, as the web bundle writes its own (a folded block scalar).
- id: system-prompt
  config:
    persona: >-
      You are a careful agent: {{model}}
      in {{cwd}}.

- id: tools
  config:
    mode: !!js process.env.DSH_TOOLS_MODE

- id: session-reference
  name: '@deepseek-ai/dsh-session-reference'
  config:
    maxReferences: 2          # two sources a message
    candidateLimit: 80
    maxReferenceBytes: 131072
"""


def layer(text: str | None, label: str = "profile") -> ProfileLayer:
    return ProfileLayer(label, text)


def test_the_subset_reads_dshs_own_constructs() -> None:
    assert parse_yaml(TEMPLATE) == []
    patches = parse_yaml(EDITED)
    assert isinstance(patches, list)
    assert patches[0] == {
        "id": "system-prompt",
        "config": {"persona": "You are a careful agent: {{model}} in {{cwd}}."},
    }
    assert patches[1]["config"]["mode"] == JsExpression("process.env.DSH_TOOLS_MODE")
    assert patches[2]["config"] == {"maxReferences": 2, "candidateLimit": 80, "maxReferenceBytes": 131072}
    flow = parse_yaml("- {id: session-reference, config: {maxReferenceBytes: 1e5, x: [1, 'a''b', \"c\\n\"]}}")
    assert flow == [
        {"id": "session-reference", "config": {"maxReferenceBytes": 100000.0, "x": [1, "a'b", "c\n"]}}
    ]
    # js-yaml's JSON schema: these stay text, never YAML 1.1's booleans or sexagesimals
    assert parse_yaml("[yes, 'null', 1:30, ~, True, 0x10]") == [
        "yes",
        "null",
        "1:30",
        None,
        True,
        OtherNumber("0x10"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "- &a {id: x}\n- *a\n",
        "- !!python/object {}\n",
        "? complex\n: key\n",
        "- id: 'never closed\n",
        "a: 1\na: 2\n",
        "---\n[]\n---\n[]\n",
        "- [" * 100 + "]" * 100,
        "- a\n\t- b\n",
    ],
)
def test_what_the_subset_does_not_read_is_refused_never_guessed(text: str) -> None:
    with pytest.raises(YamlSubsetError):
        parse_yaml(text)


def test_the_last_layer_that_configures_the_row_decides_every_budget() -> None:
    """A patch replaces the row's whole config: the home layer's config without candidateLimit
    brings candidateLimit back to dsh's default, whatever the profile layer said."""
    home = "- id: session-reference\n  config: {maxReferenceBytes: 300}\n"
    read = budgets_from_layers("web", [layer(EDITED, "profile"), layer(home, "home")])
    assert read == ProfileBudgets(
        {"maxReferenceBytes": 300}, {"maxReferenceBytes": "dsh profile 'web' (home)"}
    )
    only_profile = budgets_from_layers("web", [layer(EDITED, "profile"), layer(None, "home")])
    assert only_profile.values == {"maxReferences": 2, "candidateLimit": 80, "maxReferenceBytes": 131072}


def test_a_js_value_or_anything_but_a_plain_number_is_ignored_with_a_warning() -> None:
    text = (
        "- id: session-reference\n  config:\n    maxReferences: 5\n"
        "    candidateLimit: '80'\n    maxReferenceBytes: !!js 2 ** 17\n"
    )
    read = budgets_from_layers("web", [layer(text)])
    assert read.values == {}
    assert [warning.split(": ", 2)[2] for warning in read.warnings] == [
        "maxReferences is above 3 (dsh refuses it too); ignored",
        "candidateLimit is not a plain positive integer (dsh refuses it too); ignored",
        "maxReferenceBytes is a !!js expression, which is never evaluated here; ignored",
    ]
    whole = budgets_from_layers(
        "web", [layer("- id: session-reference\n  config: !!js ({maxReferences: 1})\n")]
    )
    assert whole.values == {} and "config is a !!js expression" in whole.warnings[0]


def test_patches_dsh_would_skip_are_skipped_and_an_insert_counts() -> None:
    other_name = "- id: session-reference\n  name: other-plugin\n  config: {maxReferences: 1}\n"
    assert budgets_from_layers("web", [layer(other_name)]).values == {}
    inserted = "- insert:\n    - id: session-reference\n      config: {maxReferences: 1}\n"
    assert budgets_from_layers("web", [layer(inserted)]).values == {"maxReferences": 1}
    broken = budgets_from_layers("web", [layer("- id: [\n")])
    assert broken.values == {} and "budgets from it are ignored" in broken.warnings[0]


def test_a_profile_name_is_one_folder_never_a_path() -> None:
    assert profile_name_problem("web") is None
    assert all(profile_name_problem(bad) for bad in ("", "..", "a/b", "a\\b", "node_modules", "."))


def test_flag_then_profile_then_default_and_the_server_bound() -> None:
    profile = ProfileBudgets(
        {"maxReferenceBytes": 8 << 20, "candidateLimit": 70},
        {"maxReferenceBytes": "p", "candidateLimit": "p"},
    )
    config, warnings = combine_limits({"candidateLimit": (9, "--candidate-limit")}, profile, bounded=False)
    assert config == ResolverConfig(3, 9, 8 << 20)
    assert config.origins == (DSH_DEFAULT, "--candidate-limit", "p") and warnings == []
    bounded, warnings = combine_limits({}, profile, bounded=True)
    assert (bounded.candidate_limit, bounded.max_reference_bytes) == (70, 1 << 20)
    assert warnings == [
        "p: maxReferenceBytes 8,388,608 is above this server's bound of 1,048,576; using 1,048,576, so the preview may omit what dsh keeps"
    ]


def test_the_cli_takes_the_profile_and_a_flag_wins(tmp_path: Path) -> None:
    from dsh_session_reference.sample import write_sample_store

    root = tmp_path / "sessions"
    write_sample_store(str(root))
    home = tmp_path / "home"
    (home / "profiles" / "review").mkdir(parents=True)
    (home / "profiles" / "review" / "cordis.patch.yml").write_text(
        "- id: session-reference\n  config:\n    maxReferenceBytes: 4096\n    candidateLimit: 2\n"
    )
    env = {**os.environ, "DSH_HOME": str(home)}
    env.pop("DSH_SESSION_ID", None)
    base = [sys.executable, "-m", "dsh_session_reference"]
    listed = subprocess.run(
        [*base, "candidates", "--json", "--sessions", str(root), "--profile", "review"],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    assert listed.stdout.count('"sessionId"') == 2
    prompt = tmp_path / "prompt.md"
    first = listed.stdout.split('"sessionId": "')[1].split('"')[0]
    prompt.write_text(f"see {format_session_reference_mention(first)}")
    report = subprocess.run(
        [*base, "prepare", "--sessions", str(root), "--profile", "review", "--candidate-limit", "7", str(prompt)],
        capture_output=True, text=True, env=env, check=True,
    ).stdout  # fmt: skip
    source = home / "profiles" / "review" / "cordis.patch.yml"
    assert "\n".join(report.split("\n")[report.split("\n").index("Budgets") :][:4]) == "\n".join(
        [
            "Budgets",
            "    maxReferences     3 from dsh's default",
            "    candidateLimit    7 from --candidate-limit",
            f"    maxReferenceBytes 4,096 from dsh profile 'review' ({source})",
        ]
    )

"""The wheels bundled into the .vsix are the files requirements/dev.lock hashes, and the release
publishes with the tools vscode-client's lock pins, with ``id-token`` only where it is used.

Before: the bundle script turned the lock into a constraints file of bare versions (hashes dropped),
so whatever file an index served under a pinned version went into every package; the release ran
``npx --yes`` (fetching vsce and ovsx, unlocked, while the publishing tokens were set) and granted
``id-token: write`` to every job.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from test_packages import REPO, _bundler

WORKFLOW = REPO / ".github" / "workflows" / "release.yml"


def _wheel(folder: Path, name: str, content: bytes) -> str:
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(content)
    return hashlib.sha256(content).hexdigest()


def test_a_wheel_is_bundled_only_with_a_hash_the_lock_lists(tmp_path: Path) -> None:
    bundler = _bundler()
    wheels = tmp_path / "wheels"
    good = _wheel(wheels, "pygls-2.1.1-py3-none-any.whl", b"the tested file")
    lock = (
        "anyio==4.16.0 \\\n    --hash=sha256:" + "0" * 64 + "\n    # via watchfiles\n"
        f"pygls==2.1.1 \\\n    --hash=sha256:{'1' * 64} \\\n    --hash=sha256:{good}\n    # via x\n"
    )
    assert bundler.verify_wheels(wheels, lock) == ["pygls-2.1.1-py3-none-any.whl"]
    _wheel(wheels, "pygls-2.1.1-py3-none-any.whl", b"another file under the same version")
    with pytest.raises(SystemExit, match=r"pygls-2\.1\.1-py3-none-any\.whl: sha256 [0-9a-f]{64} is not one"):
        bundler.verify_wheels(wheels, lock)
    (wheels / "pygls-2.1.1-py3-none-any.whl").unlink()
    _wheel(wheels, "pygls-2.1.2-py3-none-any.whl", b"the tested file")
    with pytest.raises(SystemExit, match=r"pins pygls==2\.1\.1"):
        bundler.verify_wheels(wheels, lock)
    (wheels / "pygls-2.1.2-py3-none-any.whl").unlink()
    _wheel(wheels, "evil-1.0-py3-none-any.whl", b"x")
    with pytest.raises(SystemExit, match=r"evil is not in dev\.lock"):
        bundler.verify_wheels(wheels, lock)


def test_the_real_lock_has_hashes_for_every_bundled_distribution() -> None:
    bundler = _bundler()
    locked = bundler.locked_hashes((REPO / "requirements" / "dev.lock").read_text(encoding="utf-8"))
    for name in (
        "pygls",
        "lsprotocol",
        "cattrs",
        "attrs",
        "zstandard",
        "watchfiles",
        "anyio",
        "pyicu-wheels",
    ):
        version, hashes = locked[name]
        assert version and len(hashes) >= 1, name


def _jobs(workflow: str) -> dict[str, str]:
    body = workflow[workflow.index("\njobs:\n") :]
    parts = re.split(r"\n  ([a-z-]+):\n", body)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_release_publishes_with_locked_tools_and_grants_id_token_to_one_job() -> None:
    workflow = WORKFLOW.read_text(encoding="utf-8")
    assert "npx" not in workflow
    top = workflow[workflow.index("\npermissions:\n") : workflow.index("\njobs:\n")]
    assert top.split("\n")[2:] == ["  contents: read", ""], top
    jobs = _jobs(workflow)
    with_id_token = [name for name, job in jobs.items() if "id-token: write" in job]
    assert with_id_token == ["pypi"], with_id_token
    assert "pypa/gh-action-pypi-publish" in jobs["pypi"] and "secrets." not in jobs["pypi"]
    registries = jobs["registries"]
    install = registries.index("npm ci --ignore-scripts --no-audit --no-fund")
    for tool in ("vsce", "ovsx"):
        publish = registries.index(
            f"run: vscode-client/node_modules/.bin/{tool} publish --packagePath dist/*.vsix"
        )
        assert install < publish, tool
    # The tokens are set only on the steps that publish, never while npm installs.
    install_step = registries[
        registries.rindex("\n      - ", 0, install) : registries.index("\n      - ", install)
    ]
    assert "secrets." not in install_step
    assert [name for name, job in jobs.items() if "contents: write" in job] == ["github-release"]

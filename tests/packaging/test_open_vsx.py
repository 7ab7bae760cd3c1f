"""Every package ``scripts/package`` builds is one Open VSX accepts, and the release publishes them all.

The VS Code forks install only from Open VSX. These tests apply the registry's own publishing
checks (``open_vsx.py``, ported from its server) to each built ``.vsix``, prove those checks refuse
what the registry refuses, and run the release workflow's ``ovsx publish`` line itself against a
registry on 127.0.0.1 that answers as open-vsx.org's publish endpoint does, so the command, its
version and the package set are what a release would upload.
"""

from __future__ import annotations

import http.server
import io
import json
import os
import re
import subprocess
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from open_vsx import Published, check_vsix

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "vscode-client"
VERSION = "0.1.0"
TARGETS = ("linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64")


def _vsix_files(packages: Path) -> dict[str, Path]:
    """Each package by the target platform its file name says it was built for."""
    found = {}
    for path in sorted(packages.glob("*.vsix")):
        match = re.fullmatch(rf"dsh-session-reference-(?:(.+)-)?{re.escape(VERSION)}\.vsix", path.name)
        assert match, path.name
        found[match.group(1) or "universal"] = path
    return found


def _publish_steps() -> dict[str, dict[str, object]]:
    """The registries job's ``run:`` lines that publish, by the tool they run (vscode-client's own
    ``node_modules/.bin/TOOL``), each with its ``env:`` (read as text: the workflow is plain enough,
    and no YAML parser is a dependency of this project)."""
    workflow = (REPO / ".github" / "workflows" / "release.yml").read_text()
    job = workflow[workflow.index("\n  registries:\n") : workflow.index("\n  github-release:\n")]
    steps = {}
    for step in re.split(r"\n      - ", job)[1:]:
        run = re.search(r"^        run: (.+)$", step, re.MULTILINE)
        if run is None or " publish " not in run.group(1):
            continue
        env = dict(re.findall(r"^          ([A-Z_]+): (.+)$", step, re.MULTILINE))
        steps[run.group(1).split(" publish ")[0]] = {"run": run.group(1), "env": env}
    return steps


def _pinned_ovsx() -> str:
    return str(json.loads((CLIENT / "package.json").read_text())["devDependencies"]["ovsx"])


def test_every_package_passes_the_open_vsx_checks(packages: Path) -> None:
    files = _vsix_files(packages)
    assert sorted(files) == sorted([*TARGETS, "universal"])
    for target, path in files.items():
        published = check_vsix(path.read_bytes())
        assert published.issues == [], (path.name, published.issues)
        assert (published.namespace, published.name, published.version, published.target_platform) == (
            "dsh-session-reference",
            "dsh-session-reference",
            VERSION,
            target,
        )


def _rewrite(vsix: bytes, change: Callable[[str, bytes], tuple[str, bytes, bytes] | None]) -> bytes:
    """A copy of a package with some entries changed: ``change`` returns (name, data, extra) for
    each entry to keep, None to drop it."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(vsix)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            kept = change(info.filename, source.read(info))
            if kept is not None:
                name, data, extra = kept
                entry = zipfile.ZipInfo(name, info.date_time)
                entry.extra = extra
                target.writestr(entry, data)
    return out.getvalue()


def _edit_json(name: str, data: bytes, edit: Callable[[dict[str, object]], None]) -> bytes:
    if name != "extension/package.json":
        return data
    package = json.loads(data)
    edit(package)
    return json.dumps(package).encode()


def _manifest(name: str, data: bytes, old: str, new: str) -> bytes:
    if name != "extension.vsixmanifest":
        return data
    assert old.encode() in data, old
    return data.replace(old.encode(), new.encode())


def test_the_checks_refuse_what_open_vsx_refuses(packages: Path) -> None:
    """The checker on broken copies of the real universal package: each fault is caught with the
    message the registry would answer."""
    vsix = _vsix_files(packages)["universal"].read_bytes()

    def issues(change: Callable[[str, bytes], tuple[str, bytes, bytes] | None]) -> list[str]:
        return check_vsix(_rewrite(vsix, change)).issues

    def drop_license(package: dict[str, object]) -> None:
        del package["license"]

    def unlicense(name: str, data: bytes) -> bytes:
        data = _edit_json(name, data, drop_license)
        if name == "extension.vsixmanifest":
            data = re.sub(rb"<License>[^<]*</License>|<Asset Type=\"[^\"]*License\"[^>]*>", b"", data)
        return data

    unlicensed = issues(lambda n, d: None if n == "extension/LICENSE.txt" else (n, unlicense(n, d), b""))
    assert unlicensed == ["This extension cannot be accepted because it has no license."]
    assert "Entry not found: extension/LICENSE.txt" in issues(
        lambda n, d: None if n == "extension/LICENSE.txt" else (n, d, b"")
    )

    svg = issues(lambda n, d: (n, _manifest(n, d, "images/icon.png", "images/icon.svg"), b""))
    assert "This extension cannot be accepted as it uses an unsupported icon format." in svg
    assert "Icon entry not found: extension/images/icon.svg" in svg

    no_repository = issues(
        lambda n, d: (
            n,
            _manifest(n, d, "https://github.com/deepseek-ai/dsh-session-reference.git", "not a url"),
            b"",
        )
    )
    assert "Invalid URL in field 'repository': not a url" in no_repository
    assert any("no repository" in issue for issue in issues(
        lambda n, d: (n, re.sub(rb'<Property Id="Microsoft.VisualStudio.Services.Links.Source"[^>]*>', b"", d), b"")
    ))  # fmt: skip

    extra = issues(
        lambda n, d: (n, d, b"\x55\x54\x05\x00\x01\x00\x00\x00\x00" if n == "extension/readme.md" else b"")
    )
    assert extra == ["Potentially harmful zip entry with extra fields: extension/readme.md"]

    assert "The version string 'latest' is reserved." in issues(
        lambda n, d: (n, _manifest(n, d, 'Version="0.1.0" Publisher', 'Version="latest" Publisher'), b"")
    )
    assert "Invalid namespace name: dsh session" in issues(
        lambda n, d: (n, _manifest(n, d, 'Publisher="dsh-session-reference"', 'Publisher="dsh session"'), b"")
    )
    assert "Unsupported target platform 'linux-riscv64'" in issues(
        lambda n, d: (n, _manifest(n, d, "<Identity ", '<Identity TargetPlatform="linux-riscv64" '), b"")
    )
    assert any("invalid character found in field 'description'" in issue.lower() for issue in issues(
        lambda n, d: (n, _manifest(n, d, "Mention other", "Mention\u200b other"), b"")
    ))  # fmt: skip
    assert issues(lambda n, d: (n, _manifest(n, d, "Mention other", "Mention\u200d other"), b"")) == []


class _Registry(http.server.ThreadingHTTPServer):
    """open-vsx.org's ``POST /api/-/publish?token=...`` on 127.0.0.1: each upload is checked as the
    registry checks it and answered as the registry answers (the extension's JSON, or
    ``{"error": ...}`` with status 400), and kept for the test to read."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.uploads: list[tuple[str, Published]] = []
        self.lock = threading.Lock()


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Registry

    def _body(self) -> bytes:
        """ovsx streams the file: chunked transfer encoding, which http.server leaves to us."""
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = bytearray()
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(body)
            body += self.rfile.read(size)
            self.rfile.readline()

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        data = self._body()
        if url.path != "/api/-/publish":
            self._answer(404, {"error": f"no such endpoint: {url.path}"})
            return
        token = parse_qs(url.query).get("token", [""])[0]
        published = check_vsix(data)
        with self.server.lock:
            self.server.uploads.append((token, published))
        if published.issues:
            self._answer(400, {"error": "\n".join(published.issues)})
            return
        self._answer(
            201,
            {
                "namespace": published.namespace,
                "name": published.name,
                "version": published.version,
                "targetPlatform": published.target_platform,
            },
        )

    def _answer(self, status: int, body: dict[str, str]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reports what it saw."""


@pytest.fixture
def registry() -> Iterator[_Registry]:
    server = _Registry()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


VSCE = "vscode-client/node_modules/.bin/vsce"
OVSX = "vscode-client/node_modules/.bin/ovsx"


def test_the_release_names_both_registries_with_the_tested_ovsx() -> None:
    steps = _publish_steps()
    assert set(steps) == {VSCE, OVSX}, steps
    for step in steps.values():
        assert str(step["run"]).endswith(" publish --packagePath dist/*.vsix"), step
    assert steps[OVSX]["env"] == {"OVSX_PAT": "${{ secrets.OVSX_PAT }}"}
    # The ovsx that publishes is the one tested here: vscode-client's devDependency, as its lock has it.
    lock = json.loads((CLIENT / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/ovsx"]["version"] == _pinned_ovsx()


def test_the_release_command_publishes_every_package(
    packages: Path, registry: _Registry, tmp_path: Path
) -> None:
    """The workflow's own ``run:`` line, with the ovsx it runs (vscode-client's devDependency,
    installed by npm ci) named by its absolute path."""
    prefix = OVSX
    command = str(_publish_steps()[prefix]["run"])
    ovsx = CLIENT / "node_modules" / ".bin" / "ovsx"
    if not ovsx.exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=CLIENT, check=True, capture_output=True)
    (tmp_path / "dist").symlink_to(packages)
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "OVSX_PAT": "release-token",
        "OVSX_REGISTRY_URL": f"http://127.0.0.1:{registry.server_address[1]}",
    }
    run = subprocess.run(
        ["bash", "-c", command.replace(prefix, str(ovsx), 1)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    uploaded = sorted((token, p.target_platform, p.issues) for token, p in registry.uploads)
    assert uploaded == sorted(("release-token", target, []) for target in [*TARGETS, "universal"])
    published = sorted(
        re.findall(r"Published dsh-session-reference\.dsh-session-reference v(\S+)", run.stdout)
    )
    assert published == sorted([f"{VERSION}@{target}" for target in TARGETS] + [VERSION]), run.stdout

"""What Open VSX checks when a ``.vsix`` is published, applied offline to the bytes of one package.

The VS Code forks (Cursor, Windsurf, VSCodium, Kiro...) install from open-vsx.org, and a package it
refuses is found out only at release time, after the Marketplace has already taken the same one.
``ovsx publish`` of a prebuilt package checks nothing on the client (it reads the publisher from
``extension/package.json`` and uploads), so every rule here is the server's, ported from
eclipse-openvsx/openvsx ``server/src/main/java/org/eclipse/openvsx/`` at daef4650 (2026-04-27):
``ExtensionProcessor`` (what is read, and from where), ``publish/PublishExtensionVersionHandler``
(namespace and name, license, icon, file resources, metadata), ``ExtensionValidator`` (the rules
themselves), ``publish/PublishingConfig`` (SVG icons refused, 512 MiB), ``util/TargetPlatform`` and
``scanning/MaliciousZipCheckService`` (no zip entry may carry extra fields). open-vsx.org runs with
``ovsx.publishing.require-license`` on, so a license is required here too. Beyond the server, the
manifest must name a repository and ``engines.vscode``, which the forks read to decide whether the
extension runs on them.

What the server checks against its database (the namespace exists and the token may publish to
it, the version is new, dependencies resolve, the blocklist of file hashes, the secret scanner) has
no offline equivalent; the release needs the namespace created once (``ovsx create-namespace``).
"""

from __future__ import annotations

import io
import json
import re
import unicodedata
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

VSIX_MANIFEST = "extension.vsixmanifest"
PACKAGE_JSON = "extension/package.json"
_NS = "{http://schemas.microsoft.com/developer/vsx-schema/2011}"

NAME_PATTERN = re.compile(r"[A-Za-z0-9_\-+$~]+")  # Java's [\w\-\+\$~]+, \w being ASCII there
DEFAULT_STRING_SIZE = 255
DESCRIPTION_SIZE = 2048
GALLERY_COLOR_SIZE = 16
MAX_CONTENT_SIZE = 512 * 1024 * 1024
RESERVED_VERSIONS = ("latest", "pre-release", "reviews")
SEMVER = re.compile(
    r"(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)"
    r"(?:-(?:(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+(?:[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
TARGET_PLATFORMS = (
    "win32-x64", "win32-ia32", "win32-arm64", "linux-x64", "linux-arm64", "linux-armhf",
    "alpine-x64", "alpine-arm64", "darwin-x64", "darwin-arm64", "web", "universal",
)  # fmt: skip
UNSUPPORTED_ICON_FORMATS = ("svg",)
# Character.getType values the server refuses in text fields: CONTROL, FORMAT, UNASSIGNED,
# PRIVATE_USE, LINE_SEPARATOR, PARAGRAPH_SEPARATOR.
REFUSED_CATEGORIES = ("Cc", "Cf", "Cn", "Co", "Zl", "Zp")
ZERO_WIDTH_JOINER = "\u200d"  # allowed in the description only (emoji sequences)
JAVA_URL_PROTOCOLS = ("http", "https", "ftp", "file", "jar", "mailto")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

ICON_ASSET = "Microsoft.VisualStudio.Services.Icons.Default"
LICENSE_ASSET = "Microsoft.VisualStudio.Services.Content.License"


@dataclass
class Published:
    """What the registry would record for one accepted package."""

    namespace: str
    name: str
    version: str
    target_platform: str
    issues: list[str] = field(default_factory=list)


def _properties(metadata: ET.Element) -> dict[str, str]:
    found = metadata.find(f"{_NS}Properties")
    if found is None:
        return {}
    return {prop.get("Id", ""): prop.get("Value", "") for prop in found.findall(f"{_NS}Property")}


def _assets(root: ET.Element) -> dict[str, str]:
    found = root.find(f"{_NS}Assets")
    if found is None:
        return {}
    return {asset.get("Type", ""): asset.get("Path", "") for asset in found.findall(f"{_NS}Asset")}


def _text(metadata: ET.Element, tag: str) -> str:
    element = metadata.find(f"{_NS}{tag}")
    return (element.text or "") if element is not None else ""


def _list(value: str) -> list[str]:
    return value.split(",") if value else []


def check_characters(value: str | None, name: str, allowed: Iterable[str] = ()) -> list[str]:
    if value is None:
        return []
    for index, char in enumerate(value):
        if char not in allowed and unicodedata.category(char) in REFUSED_CATEGORIES:
            return [f"Invalid character found in field '{name}': {value} (index {index})"]
    return []


def check_size(value: str | None, limit: int, name: str) -> list[str]:
    if value is not None and len(value) > limit:
        return [f"The field '{name}' exceeds the current limit of {limit} characters."]
    return []


def is_invalid_url(value: str) -> bool:
    """``ExtensionValidator.isInvalidURL``: ``git+`` is stripped, then ``java.net.URL`` must parse
    it (a protocol it knows), and an http(s) URL must name a host."""
    if value.startswith("git+") and len(value) > 4:
        value = value[4:]
    parts = urlsplit(value)
    if parts.scheme.lower() not in JAVA_URL_PROTOCOLS:
        return True
    return parts.scheme.lower() in ("http", "https") and not parts.hostname


def check_url(value: str, name: str) -> list[str]:
    if value and is_invalid_url(value):
        return [f"Invalid URL in field '{name}': {value}"]
    return []


def check_name(value: str, what: str) -> list[str]:
    """``validateNamespace`` and ``validateExtensionName``."""
    if not value or value == "-":
        return [f"{what} must not be empty."]
    if not NAME_PATTERN.fullmatch(value):
        return [f"Invalid {what.lower()}: {value}"]
    if len(value) > DEFAULT_STRING_SIZE:
        return [f"The {what.lower()} exceeds the current limit of {DEFAULT_STRING_SIZE} characters."]
    return []


def check_version(version: str) -> list[str]:
    if not version:
        return ["Version must not be empty."]
    issues = []
    if version in RESERVED_VERSIONS:
        issues.append(f"The version string '{version}' is reserved.")
    if not SEMVER.fullmatch(version):
        issues.append("Invalid semantic version. See https://semver.org/.")
    return issues


def check_vsix(data: bytes) -> Published:
    """Every offline rule, on the bytes ``ovsx publish`` would upload. Issues are the server's own
    messages, except the few rules beyond it, which say so."""
    issues: list[str] = []
    if len(data) > MAX_CONTENT_SIZE:
        issues.append(f"The extension package exceeds the size limit of {MAX_CONTENT_SIZE} bytes.")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as error:
        return Published("", "", "", "", [f"Could not read zip file: {error}"])
    with archive:
        names = set(archive.namelist())
        for name in (VSIX_MANIFEST, PACKAGE_JSON):
            if name not in names:
                return Published("", "", "", "", [f"Entry not found: {name}"])
        issues += [
            f"Potentially harmful zip entry with extra fields: {info.filename}"
            for info in archive.infolist()
            if info.extra
        ]
        root = ET.fromstring(archive.read(VSIX_MANIFEST))
        try:
            package: dict[str, Any] = json.loads(archive.read(PACKAGE_JSON))
        except ValueError as error:
            return Published("", "", "", "", [f"Invalid JSON format in {PACKAGE_JSON}: {error}"])

        metadata = root.find(f"{_NS}Metadata")
        identity = metadata.find(f"{_NS}Identity") if metadata is not None else None
        if metadata is None or identity is None:
            return Published("", "", "", "", [f"{VSIX_MANIFEST} has no Metadata/Identity"])
        namespace = identity.get("Publisher", "")
        name = identity.get("Id", "")
        version = identity.get("Version", "")
        target = identity.get("TargetPlatform") or "universal"
        issues += check_name(namespace, "Namespace name")
        issues += check_name(name, "Extension name")
        issues += check_version(version)
        if target not in TARGET_PLATFORMS:
            issues.append(f"Unsupported target platform '{target}'")
        if (package.get("publisher"), package.get("name"), package.get("version")) != (
            namespace,
            name,
            version,
        ):
            issues.append("package.json's publisher, name and version differ from the vsixmanifest's")

        properties = _properties(metadata)
        assets = _assets(root)

        # License: the package.json field or a license file the manifest points at (require-license).
        license_path = _text(metadata, "License") or assets.get(LICENSE_ASSET, "")
        if license_path and license_path not in names:
            issues.append(f"Entry not found: {license_path}")
        if not package.get("license") and not license_path:
            issues.append("This extension cannot be accepted because it has no license.")

        # Icon: from the manifest's assets, else package.json's "icon"; never SVG; present.
        icon_path = assets.get(ICON_ASSET) or (
            "extension/" + package["icon"].replace("\\", "/") if isinstance(package.get("icon"), str) else ""
        )
        if icon_path:
            if icon_path.rsplit(".", 1)[-1].lower() in UNSUPPORTED_ICON_FORMATS:
                issues.append("This extension cannot be accepted as it uses an unsupported icon format.")
            if icon_path not in names:
                issues.append(f"Icon entry not found: {icon_path}")

        # File resources: every asset the manifest names must be readable.
        issues += [
            f"Validation failed: entry not found: {path}" for path in assets.values() if path not in names
        ]

        # Metadata (validateMetadata), from where ExtensionProcessor reads each field.
        description_element = metadata.find(f"{_NS}Description")
        description = description_element.text or "" if description_element is not None else ""
        display_name = _text(metadata, "DisplayName")
        issues += check_characters(display_name, "displayName") + check_size(
            display_name, DEFAULT_STRING_SIZE, "displayName"
        )
        issues += check_characters(description, "description", [ZERO_WIDTH_JOINER])
        issues += check_size(description, DESCRIPTION_SIZE, "description")
        for field_name, values in (
            ("categories", _list(_text(metadata, "Categories"))),
            ("keywords", _list(_text(metadata, "Tags"))),
        ):
            for value in values:
                issues += check_characters(value, field_name) + check_size(
                    value, DEFAULT_STRING_SIZE, field_name
                )
        license_id = package.get("license")
        if isinstance(license_id, str):
            issues += check_characters(license_id, "license") + check_size(
                license_id, DEFAULT_STRING_SIZE, "license"
            )
        for field_name, property_id in (
            ("homepage", "Microsoft.VisualStudio.Services.Links.Learn"),
            ("repository", "Microsoft.VisualStudio.Services.Links.Source"),
            ("bugs", "Microsoft.VisualStudio.Services.Links.Support"),
        ):
            value = properties.get(property_id, "")
            issues += check_url(value, field_name) + check_size(value, DEFAULT_STRING_SIZE, field_name)
        markdown = package.get("markdown")
        if markdown and markdown not in ("github", "standard"):
            issues.append(
                f"Invalid value in field 'markdown': {markdown}. Allowed values: [github, standard]"
            )
        color = properties.get("Microsoft.VisualStudio.Services.Branding.Color", "")
        issues += check_characters(color, "galleryBanner.color") + check_size(
            color, GALLERY_COLOR_SIZE, "galleryBanner.color"
        )
        theme = properties.get("Microsoft.VisualStudio.Services.Branding.Theme", "")
        if theme and theme not in ("dark", "light"):
            issues.append(
                f"Invalid value in field 'galleryBanner.theme': {theme}. Allowed values: [dark, light]"
            )
        qna = package.get("qna")
        if isinstance(qna, str) and qna and qna not in ("marketplace", "false") and is_invalid_url(qna):
            issues.append(
                f"Invalid value in field 'qna': {qna}. Allowed values: [marketplace, false] or a URL"
            )

        # Dependencies and packs must be ${namespace}.${name} (and resolvable on the registry).
        for field_name, property_id in (
            ("extensionDependencies", "Microsoft.VisualStudio.Code.ExtensionDependencies"),
            ("extensionPack", "Microsoft.VisualStudio.Code.ExtensionPack"),
        ):
            for dependency in _list(properties.get(property_id, "")):
                if not re.fullmatch(r"[\w-]+\.[\w-]+", dependency):
                    issues.append(f"Invalid '{field_name}' format. Expected: '${{namespace}}.${{name}}'")

        # Beyond the server: the forks need a repository, an engine range, and an icon that is a PNG.
        if not properties.get("Microsoft.VisualStudio.Services.Links.Source"):
            issues.append("(beyond the server) no repository: package.json needs a 'repository' URL")
        engine = package.get("engines", {}).get("vscode", "")
        if not re.fullmatch(r"\^?\d+\.\d+\.\d+", engine):
            issues.append(f"(beyond the server) engines.vscode is not a version range: {engine!r}")
        if icon_path in names and not archive.read(icon_path).startswith(PNG_SIGNATURE):
            issues.append(f"(beyond the server) the icon is not a PNG: {icon_path}")

    return Published(namespace, name, version, target, issues)

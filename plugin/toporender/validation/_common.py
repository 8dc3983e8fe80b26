"""Shared helpers: object identity, JSON-path formatting and name syntax used by every rule set."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a mapping, else ``{}``: rules tolerate malformed input the schema reports."""
    return value if isinstance(value, dict) else {}


def format_path(parts: Iterable[Any]) -> str:
    """Render a JSON path as ``spec.subGroups[1].name``; keys that are not identifiers are quoted."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{str(part)!r}]"
    return out or "(root)"


def identity(obj: Any) -> str:
    """``Kind/namespace/name`` (``Kind/name`` when there is no namespace), robust to malformed objects."""
    if not isinstance(obj, dict):
        return "<not an object>"
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) and obj.get("kind") else "<no kind>"
    meta = as_dict(obj.get("metadata"))
    name = meta.get("name") if isinstance(meta.get("name"), str) and meta.get("name") else "<no name>"
    ns = meta.get("namespace")
    if isinstance(ns, str) and ns:
        return f"{kind}/{ns}/{name}"
    return f"{kind}/{name}"


def split_api_version(api_version: Any) -> tuple[str, str] | None:
    """``group/version`` -> (group, version); core ``v1`` -> ("", "v1"); None when malformed."""
    if not isinstance(api_version, str) or not api_version or api_version.count("/") > 1:
        return None
    group, _, version = api_version.rpartition("/")
    if not version or (api_version.startswith("/")):
        return None
    return group, version


def dns_label_problem(value: str, what: str = "DNS-1123 label") -> str | None:
    """Why ``value`` is not a DNS-1123 label (lower-case alphanumerics and '-', <= 63), or None."""
    if len(value) > 63:
        return f"{value!r} is longer than 63 characters ({len(value)}); must be a {what}"
    if not DNS1123_LABEL.match(value):
        return f"{value!r} is not a {what} (lower-case letters, digits and '-', starting and ending alphanumeric)"
    return None


def dns_subdomain_problem(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 subdomain (labels joined by '.', <= 253), or None."""
    if len(value) > 253:
        return f"{value!r} is longer than 253 characters ({len(value)}); must be a DNS-1123 subdomain"
    if not DNS1123_SUBDOMAIN.match(value):
        return (
            f"{value!r} is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', starting "
            "and ending alphanumeric)"
        )
    return None


def dns1035_problem(value: str) -> str | None:
    """Why ``value`` is not a DNS-1035 label (starts with a letter, <= 63), or None."""
    if len(value) > 63:
        return f"{value!r} is longer than 63 characters ({len(value)}); must be a DNS-1035 label"
    if not DNS1035_LABEL.match(value):
        return (
            f"{value!r} is not a DNS-1035 label (lower-case letters, digits and '-', starting with a "
            "letter and ending alphanumeric)"
        )
    return None


@lru_cache(maxsize=4096)
def qualified_name_problem(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes qualified name (label/annotation key syntax), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return f"key {key!r} has an empty prefix before '/'"
        if "/" in prefix:
            return f"key {key!r} has more than one '/'"
        if len(prefix) > 253:
            return f"key {key!r}: prefix is longer than 253 characters"
        if not DNS1123_SUBDOMAIN.match(prefix):
            return f"key {key!r}: prefix {prefix!r} is not a DNS-1123 subdomain"
    if not name:
        return f"key {key!r} has an empty name part"
    if len(name) > 63:
        return f"key {key!r}: name part is longer than 63 characters ({len(name)})"
    if not QUALIFIED_NAME_PART.match(name):
        return (
            f"key {key!r}: name part {name!r} must consist of alphanumerics, '-', '_' or '.', starting "
            "and ending alphanumeric"
        )
    return None


@lru_cache(maxsize=4096)
def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid label value (<= 63, alphanumeric ends, '-_.' inside), or None."""
    if len(value) > 63:
        return f"value {value!r} is longer than 63 characters ({len(value)})"
    if not LABEL_VALUE.match(value):
        return (
            f"value {value!r} must be empty or consist of alphanumerics, '-', '_' or '.', starting and "
            "ending alphanumeric"
        )
    return None


Problem = tuple[str, str]
"""A problem in one object: (JSON path, message)."""


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

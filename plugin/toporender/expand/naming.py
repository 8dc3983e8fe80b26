"""Stable Kubernetes names and identifiers derived from user names.

Renders must never churn: every identifier is a pure function of names (uuid5), and every
name we build is a valid DNS label, shortened with a hash suffix so distinct inputs stay distinct.
"""

from __future__ import annotations

import hashlib
import re
import uuid

TOPORENDER_NS = uuid.uuid5(uuid.NAMESPACE_DNS, "toporender.dev")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
USER_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
_INVALID = re.compile(r"[^a-z0-9-]+")
_DASHES = re.compile(r"-{2,}")


def is_dns_label(text: str) -> bool:
    """A DNS-1123 label, as namespaces must be."""
    return len(text) <= 63 and DNS_LABEL.match(text) is not None


def normalize(name: str) -> str:
    """OSMO's name identity: case-insensitive, with ``_`` equal to ``-``."""
    return name.lower().replace("_", "-")


def short_hash(text: str, length: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def dns_label(text: str, max_len: int = 63, *, hash_source: str | None = None) -> str:
    """Lower-case DNS-1123 label from ``text``; a hash of the original is appended when it was cut.

    ``hash_source`` forces a suffix derived from it (used to split names that collide once
    sanitised, e.g. ``A_b`` and ``a-b``).
    """
    if hash_source is None and len(text) <= max_len and "--" not in text and DNS_LABEL.match(text):
        return text
    base = _DASHES.sub("-", _INVALID.sub("-", text.lower())).strip("-")
    if hash_source is None and base and len(base) <= max_len:
        return base
    suffix = short_hash(hash_source if hash_source is not None else text)
    head = base[: max_len - len(suffix) - 1].rstrip("-")
    return f"{head}-{suffix}" if head else f"x{suffix}"


def dns1035_label(text: str, max_len: int = 63) -> str:
    """A DNS-1035 label (must start with a letter), as Service names require."""
    label = dns_label(text, max_len)
    if label[0].isalpha():
        return label
    return dns_label("x-" + text, max_len)


def uid(parent: uuid.UUID, name: str) -> uuid.UUID:
    return uuid.uuid5(parent, name)


def uid_text(parent: uuid.UUID, name: str) -> str:
    """``str(uuid.uuid5(parent, name))`` without building a UUID object (one per task adds up)."""
    digest = bytearray(hashlib.sha1(parent.bytes + name.encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def workflow_uuid(namespace: str, workflow: str) -> uuid.UUID:
    return uid(TOPORENDER_NS, f"{namespace}/{normalize(workflow)}")


def unique_names(raw: list[str], max_len: int = 63) -> list[str]:
    """Sanitise each raw name to a DNS label, disambiguating collisions with a hash of the raw name."""
    first = [dns_label(r, max_len) for r in raw]
    counts: dict[str, int] = {}
    for name in first:
        counts[name] = counts.get(name, 0) + 1
    return [dns_label(r, max_len, hash_source=r) if counts[n] > 1 else n for r, n in zip(raw, first)]

"""Stable Kubernetes names and identifiers derived from user names.

Renders must never churn: every identifier is a pure function of names (uuid5), and every
name we build is a valid DNS label, shortened with a hash suffix so distinct inputs stay distinct.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections import Counter
from collections.abc import Callable

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


def dns_label(text: str, max_len: int = 63, *, hash_source: str | None = None, hash_len: int = 8) -> str:
    """Lower-case DNS-1123 label from ``text``; a hash of the original is appended when it was cut.

    ``hash_source`` forces a suffix derived from it (used to split names that collide once
    sanitised, e.g. ``A_b`` and ``a-b``); ``hash_len`` is the suffix's length in hex digits.
    """
    if hash_source is None and len(text) <= max_len and "--" not in text and DNS_LABEL.match(text):
        return text
    base = _DASHES.sub("-", _INVALID.sub("-", text.lower())).strip("-")
    if hash_source is None and base and len(base) <= max_len:
        return base
    suffix = short_hash(hash_source if hash_source is not None else text, hash_len)
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


def uid_text(parent: uuid.UUID | bytes, name: str) -> str:
    """``str(uuid.uuid5(parent, name))`` without building a UUID object (one per task adds up); ``parent`` may be
    given as its bytes, worked out once for many names."""
    prefix = parent if isinstance(parent, bytes) else parent.bytes
    digest = bytearray(hashlib.sha1(prefix + name.encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def workflow_uuid(namespace: str, workflow: str) -> uuid.UUID:
    return uid(TOPORENDER_NS, f"{namespace}/{normalize(workflow)}")


def unique_names(raw: list[str], identities: list[str] | Callable[[], list[str]] | None = None,
                 max_len: int = 63) -> list[str]:
    """DNS labels for ``raw`` names that are distinct whenever the ``identities`` are (default: the raw names).

    A name keeps its raw text when that is a valid label. Names that collide once sanitised get a hash suffix
    of the raw text where that tells them apart (``A_b`` and ``a-b``), else of their identity (two paths of
    group names, ``a-b/c`` and ``a/b-c``, that join to one text). Suffixes grow while any two names still
    clash, so distinct identities always end distinct. ``identities`` may be a function that gives them, called
    only when two names clash (a large repo's subgroups seldom do).
    """
    names = [dns_label(r, max_len) for r in raw]
    clashes = Counter(names)
    if len(clashes) == len(names):
        return names
    ids = raw if identities is None else identities() if callable(identities) else identities
    texts = Counter(raw)
    names = [dns_label(r, max_len, hash_source=r if texts[r] == 1 else i) if clashes[n] > 1 else n
             for r, i, n in zip(raw, ids, names)]
    for length in (16, 32, 40):
        clashes = Counter(names)
        if all(clashes[n] == 1 for n in names):
            break
        names = [dns_label(r, max_len, hash_source=i, hash_len=length) if clashes[n] > 1 else n
                 for r, i, n in zip(raw, ids, names)]
    return names

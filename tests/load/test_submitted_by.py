"""``submitted_by`` follows OSMO: a user name, or the part of an e-mail address before ``@``, as a label value."""

from __future__ import annotations

import pytest

from toporender.load.models import submitter_label


@pytest.mark.parametrize(("value", "label"), [
    ("alice", "alice"),
    ("alice@example.com", "alice"),
    ("alice.smith@example.com", "alice.smith"),
    ("Bob_Jones", "Bob_Jones"),
    ("first last@example.com", "first-last"),
    ("-x-@example.com", "x"),
    ("a" * 80, "a" * 63),
    ("ä.user@example.com", "user"),
])
def test_submitter_becomes_a_label_value(value: str, label: str) -> None:
    assert submitter_label(value) == label


@pytest.mark.parametrize("value", ["@example.com", "---", "@"])
def test_no_user_part_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="user name or an e-mail address"):
        submitter_label(value)

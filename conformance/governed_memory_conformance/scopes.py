"""The fixed scopes most suite tests use.

They are chosen so that the usual isolation mistakes collide: a parent scope (tenant
only), siblings that differ in one dimension, a child that adds one, the same user id
in another tenant, and the same value in another dimension.
"""

from __future__ import annotations

from typing import Final

from governed_memory.scope import Scope

TENANT: Final = "conformance"
OTHER_TENANT: Final = "conformance-other"

HOME: Final = Scope(TENANT, user_id="alice")
"""Where a test writes unless it says otherwise."""

PARENT: Final = Scope(TENANT)
SIBLING: Final = Scope(TENANT, user_id="bob")
CHILD: Final = Scope(TENANT, user_id="alice", session_id="s1")
ELSEWHERE: Final = Scope(OTHER_TENANT, user_id="alice")
SAME_VALUE_OTHER_DIMENSION: Final = Scope(TENANT, agent_id="alice")

NEIGHBOURS: Final = (PARENT, SIBLING, CHILD, ELSEWHERE, SAME_VALUE_OTHER_DIMENSION)
"""Every scope that must never see ``HOME``'s records (and vice versa)."""

LOOKALIKES: Final = (
    Scope(TENANT, user_id="Alice"),
    Scope(TENANT, user_id="ALICE"),
    Scope(TENANT, user_id="\uff41\uff4c\uff49\uff43\uff45"),
    Scope(TENANT, user_id="zo\u00e9"),
    Scope(TENANT, user_id="zoe\u0301"),
    Scope("Conformance", user_id="alice"),
    Scope(TENANT, user_id="alice", session_id="S1"),
    Scope(TENANT, user_id="alice", session_id="s1"),
)
"""Scopes a provider that compares ids after case folding or Unicode normalisation
would merge, with ``HOME`` and with each other: ``HOME``'s user in other case, in
fullwidth letters (NFKC folds them to ``alice``), one user id in NFC and in NFD (the
same text to a reader, different code points), the tenant in other case, and a
session id in two cases. Scopes are exact: each of these is a scope of its own."""

MODEL_SCOPES: Final = (
    Scope(TENANT, user_id="m1"),
    Scope(TENANT, user_id="m1", session_id="m1"),
    Scope(TENANT, user_id="m2"),
)
"""The scopes the reference-model state machine writes to."""

SUITE_SCOPES: Final = (HOME, *NEIGHBOURS, *LOOKALIKES, *MODEL_SCOPES)
"""Where the suite writes most: a fresh provider must show nothing in any of them."""

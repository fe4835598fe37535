"""``[auth.jwt]``: what a profile may declare about bearer tokens, refused at load when
it cannot work, and hashed into the revision only when set."""

from __future__ import annotations

from typing import Any

import pytest
from governed_memory.principal import PrincipalKind
from governed_memory.profiles import ProfileLoadError, parse_profile

BASE: dict[str, Any] = {"spec_version": 1, "id": "x", "version": "1.0.0"}
JWT: dict[str, Any] = {"issuer": "https://id.test", "audience": "governed-memory",
                       "algorithms": ["RS256"], "key_file": "/etc/gm/jwt.pem"}


def _with(**jwt: Any) -> Any:
    return parse_profile({**BASE, "auth": {"jwt": {**JWT, **jwt}}})


def test_a_declared_jwt_section_is_read_whole() -> None:
    spec = _with(leeway_s=5, claims={"tenant": "org", "default_kind": "agent"})
    section = spec.auth.jwt
    assert section is not None and section.algorithms == ("RS256",)
    assert section.claims.tenant == "org" and section.claims.principal_id == "sub"
    assert section.claims.default_kind is PrincipalKind.AGENT and section.leeway_s == 5


@pytest.mark.parametrize(("change", "message"), [
    ({"algorithms": ["none"]}, r"auth\.jwt\.algorithms\[0\]: 'none' is not one of"),
    ({"algorithms": []}, r"auth\.jwt\.algorithms: must allow at least one"),
    ({"algorithms": ["HS256", "HS256"]}, r"auth\.jwt\.algorithms\[1\]: 'HS256' is listed"),
    ({"key_env": "K"}, r"auth\.jwt\.key_file: give exactly one of key_file and key_env"),
    ({"key_file": None}, r"auth\.jwt\.key_file: give exactly one"),
    ({"issuer": ""}, r"auth\.jwt\.issuer: must not be empty"),
    ({"leeway_s": 3600}, r"auth\.jwt\.leeway_s: must be between 0 and 300"),
    ({"claims": {"tenant": "sub"}}, r"auth\.jwt\.claims\.claims\[1\]: 'sub' is listed"),
    ({"claims": {"user": ""}}, r"auth\.jwt\.claims\.user: must name a claim"),
    ({"key": "inline-secret"}, r"auth\.jwt\.key: unknown key"),
])
def test_a_jwt_section_that_cannot_work_is_refused_at_load(change: dict[str, Any],
                                                          message: str) -> None:
    with pytest.raises(ProfileLoadError, match=message):
        _with(**change)


def test_the_revision_covers_auth_only_when_it_is_set() -> None:
    plain = parse_profile(BASE)
    assert plain.revision == parse_profile({**BASE, "auth": {}}).revision
    # Profiles published before [auth] existed keep the revision their events recorded.
    assert plain.revision == ("sha256:0d316c2a03c99c5c026ba57876dd73e55e85be9f22fdb218f7"
                              "a8d6d85ad38126")
    assert _with().revision != plain.revision
    assert _with().revision != _with(audience="another").revision

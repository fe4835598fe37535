"""``JwtSettings.from_profile``: the profile's ``[auth.jwt]`` becomes a verifier whose key
was read at start, so a missing key stops the server naming the setting."""

from __future__ import annotations

import time
from pathlib import Path

import jwt
import pytest
from governed_memory import PrincipalKind
from governed_memory.errors import MemoryConfigurationError
from governed_memory.profiles import parse_profile
from governed_memory.profiles.spec import JwtSection
from governed_memory_service import JwtSettings, JwtVerifier


def _section(**jwt_table: object) -> JwtSection:
    table = {"issuer": "https://id.test", "audience": "gm", "algorithms": ["HS256"],
             **jwt_table}
    spec = parse_profile({"spec_version": 1, "id": "x", "version": "1.0.0",
                          "auth": {"jwt": table}})
    assert spec.auth.jwt is not None
    return spec.auth.jwt


async def test_a_key_file_and_the_claims_mapping_come_from_the_profile(
        tmp_path: Path) -> None:
    secret = "file-secret-" + "f" * 40
    (tmp_path / "hmac.key").write_text(secret + "\n", encoding="utf-8")
    section = _section(key_file=str(tmp_path / "hmac.key"),
                       claims={"tenant": "org", "user": "uid", "default_kind": "agent"})
    verifier = JwtVerifier(JwtSettings.from_profile(section))
    token = jwt.encode({"iss": "https://id.test", "aud": "gm", "sub": "agent:7",
                        "org": "acme", "exp": int(time.time()) + 60}, secret,
                       algorithm="HS256")
    principal = await verifier.verify(token)
    assert principal is not None and principal.tenant_id == "acme"
    assert principal.kind is PrincipalKind.AGENT and principal.user_id is None


def test_an_unreadable_key_file_names_the_setting(tmp_path: Path) -> None:
    section = _section(key_file=str(tmp_path / "missing.pem"))
    with pytest.raises(MemoryConfigurationError, match=r"auth\.jwt\.key_file: cannot read"):
        JwtSettings.from_profile(section)


def test_an_unset_or_empty_key_env_names_the_variable() -> None:
    section = _section(key_env="GM_TEST_JWT")
    for environ in ({}, {"GM_TEST_JWT": ""}):
        with pytest.raises(MemoryConfigurationError,
                           match=r"auth\.jwt\.key_env \(GM_TEST_JWT\): the key is empty"):
            JwtSettings.from_profile(section, environ=environ)
    settings = JwtSettings.from_profile(section, environ={"GM_TEST_JWT": "s" * 40})
    assert "s" * 40 not in repr(settings)

"""The names docs/domain-packs.md lists are the ones the code accepts, exactly."""

from __future__ import annotations

import re
from pathlib import Path

from governed_memory.operations import Operation
from governed_memory.principal import Permission
from governed_memory.records import MemoryType

DOC = (Path(__file__).resolve().parents[2] / "docs" / "domain-packs.md").read_text()


def test_the_operations_table_is_the_operations() -> None:
    rows = re.findall(r"^\| `([a-z_]+)` \| ([a-z]+) \| `((?:memory|audit):[a-z]+)` \|$", DOC,
                      re.M)
    assert rows == [(o.value, o.kind.value, o.permission.value) for o in Operation]


def test_the_memory_types_and_permissions_are_listed() -> None:
    section = DOC[DOC.index("## Names a profile uses"):]
    types_line = section[section.index("Memory types"):section.index("Permissions:")]
    assert re.findall(r"`([a-z]+)`", types_line.split(":", 1)[1]) == [t.value for t in MemoryType]
    permissions = section[section.index("Permissions:"):section.index("Operations")]
    assert set(re.findall(r"`((?:memory|audit):[a-z]+)`", permissions)) == {
        p.value for p in Permission}

"""Scopes this process must not trust the cache for, because a bump failed.

A failed bump means some other lookup could still find an entry computed before the
write. Until a bump of that name succeeds, every lookup touching it bypasses the
cache. Holds carry a generation: a bump only releases the holds it saw before it
started, so a write that failed while a recovering bump was in flight is never
released by a bump that did not cover it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import attrs


@attrs.define(slots=True)
class _Hold:
    tenant_id: str
    generation: int
    expiries: set[float] = attrs.field(factory=set)


@attrs.frozen(slots=True)
class HoldSnapshot:
    """The holds a recovering bump covers: names, their generations and the expiry marks
    the failed bumps still owe the store."""

    tenant_id: str
    tag: str
    names: tuple[str, ...]
    generations: tuple[int, ...]
    expiries: tuple[float, ...]


class Quarantine:
    def __init__(self) -> None:
        self._holds: dict[tuple[str, str], _Hold] = {}
        self._generation = 0

    def __len__(self) -> int:
        return len(self._holds)

    def __bool__(self) -> bool:
        return bool(self._holds)

    def hold(self, tenant_id: str, tag: str, names: Sequence[str],
             expiries: Sequence[float] = ()) -> None:
        for name in names:
            self._generation += 1
            hold = self._holds.setdefault((tag, name), _Hold(tenant_id, self._generation))
            hold.generation = self._generation
            hold.expiries.update(expiries)

    def held(self, tag: str, names: Sequence[str]) -> tuple[str, ...]:
        if not self._holds:
            return ()
        return tuple(name for name in names if (tag, name) in self._holds)

    def snapshot(self, tag: str, names: Sequence[str]) -> HoldSnapshot | None:
        """The holds among ``names`` (or ``None``), taken before a bump that would cover
        them."""
        holds = [(name, self._holds[(tag, name)]) for name in names if (tag, name) in self._holds]
        if not holds:
            return None
        expiries = sorted({instant for _, hold in holds for instant in hold.expiries})
        return HoldSnapshot(holds[0][1].tenant_id, tag, tuple(name for name, _ in holds),
                            tuple(hold.generation for _, hold in holds), tuple(expiries))

    def release(self, snapshot: HoldSnapshot) -> tuple[str, ...]:
        """Drop the holds ``snapshot`` saw, unless one was renewed since; returns the
        names released."""
        released = []
        for name, generation in zip(snapshot.names, snapshot.generations, strict=True):
            hold = self._holds.get((snapshot.tag, name))
            if hold is not None and hold.generation == generation:
                del self._holds[(snapshot.tag, name)]
                released.append(name)
        return tuple(released)

    def snapshots(self) -> Iterator[HoldSnapshot]:
        """One snapshot per tenant, for the background retry."""
        by_tag: dict[str, list[str]] = {}
        for tag, name in self._holds:
            by_tag.setdefault(tag, []).append(name)
        for tag, names in by_tag.items():
            snapshot = self.snapshot(tag, names)
            if snapshot is not None:
                yield snapshot

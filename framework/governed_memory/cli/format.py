"""Plain-text renderings of records, pages, results and events for the terminal.

Identifiers are printed whole (record ids, revisions, scope and content hashes): a
prefix is ambiguous exactly when it matters, and ids of one second all look alike.
Only content is shortened, in one-line listings.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from governed_memory.records import MemoryRecord, MemoryVersion, Page, SearchResult
from governed_memory.replay import ReplayResult


def when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def record_text(record: MemoryRecord) -> str:
    lines = [
        f"id:        {record.id}",
        f"scope:     {record.scope.dimensions()}  ({record.scope_hash})",
        f"type:      {record.memory_type.value}   status: {record.status.value}",
        f"version:   {record.version}   revision: {record.revision}",
        f"key:       {record.key or '-'}",
        f"created:   {when(record.created_at)}   updated: {when(record.updated_at)}",
        f"expires:   {when(record.expires_at)}",
        f"content:   {record.content}",
    ]
    if record.occurred_at is not None:
        lines.insert(6, f"occurred:  {when(record.occurred_at)}")
    if record.metadata:
        lines.append(f"metadata:  {dict(record.metadata)}")
    return "\n".join(lines)


def record_line(record: MemoryRecord) -> str:
    text = record.content.replace("\n", " ")
    return (f"{record.id}  v{record.version}  {record.memory_type.value:<10} "
            f"{text[:70]}{'…' if len(text) > 70 else ''}")


def page_text(page: Page[MemoryRecord]) -> str:
    lines = [record_line(r) for r in page.items] or ["(no records)"]
    if page.next_cursor:
        lines.append(f"next cursor: {page.next_cursor}")
    return "\n".join(lines)


def search_text(result: SearchResult) -> str:
    if not result.hits:
        return "(no matches)"
    lines = []
    for hit in result.hits:
        signals = ", ".join(f"{s.name}={s.value:.3f} (#{s.rank})"
                            for s in hit.explanation.signals)
        lines.append(f"{hit.rank:>2}. {hit.score:8.3f}  {record_line(hit.record)}")
        lines.append(f"    why: {signals}")
    if result.snapshot_id is not None:
        lines.append(f"snapshot: {result.snapshot_id}  (governed-memory replay)")
    if result.next_cursor:
        lines.append(f"next cursor: {result.next_cursor}")
    return "\n".join(lines)


def history_text(versions: Iterable[MemoryVersion]) -> str:
    lines = []
    for version in versions:
        record = version.record
        lines.append(f"v{record.version}  {version.operation.value:<7} {when(version.recorded_at)}"
                     f"  {record.status.value:<8} {record.content_hash}")
    return "\n".join(lines) or "(no history)"


def trail_table(events: Iterable[Mapping[str, Any]],
                scope_labels: Mapping[str, str] | None = None) -> str:
    """One row per event of a trail (as the ``audit`` sink stores them): record ids in
    full; a scope hash as its label from ``scope_labels`` when it has one (the caller
    prints the legend), else in full."""
    labels = scope_labels or {}
    rows = [("type", "operation", "outcome", "principal", "scope", "records", "error")]
    for e in events:
        scope = e.get("scope_hash") or "-"
        rows.append((str(e.get("type", "-")), str(e.get("operation") or "-"),
                     str(e.get("outcome") or "-"), str(e.get("principal_id") or "-"),
                     labels.get(scope, scope), ",".join(e.get("record_ids") or ()) or "-",
                     str(e.get("error_code") or "-")))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("   " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row))
                     .rstrip() for row in rows)


def replay_text(result: ReplayResult) -> str:
    lines = [f"snapshot {result.snapshot_id} taken {when(result.created_at)} "
             f"(profile {result.profile}, {result.candidates} candidate(s))"]
    for hit in result.hits:
        lines.append(f"{hit.rank:>3}. {hit.score:.4f}  " + record_line(hit.record))
    lines.extend(f"     erased since: {record_id}" for record_id in result.erased_record_ids)
    if not result.hits and not result.erased_record_ids:
        lines.append("(no hits)")
    return "\n".join(lines)

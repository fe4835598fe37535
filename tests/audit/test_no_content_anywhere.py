"""The trail, the traces, the metrics and the logs carry no content: every operation
runs with marker strings and real-looking secrets in contents, metadata, keys and
queries, and none of them appears in any event, trail file, span, metric label or log
record (the issue's acceptance test)."""

from __future__ import annotations

import json
import logging
import random
import string
from pathlib import Path
from typing import Any

import attrs
import pytest
from actors import ADMIN, ALICE, ALICE_SCOPE
from governed_memory.audit import AuditSink, verify_trail
from governed_memory.clock import ManualClock
from governed_memory.errors import GovernedMemoryError
from governed_memory.events import InMemoryEventSink
from governed_memory.manager import GovernedMemoryManager
from governed_memory.operation_context import OperationContext
from governed_memory.plugins import PluginManager
from governed_memory.records import Provenance
from governed_memory.requests import AddRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_rng = random.Random(20261130)


def _chars(alphabet: str, size: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(size))


UPPER = string.ascii_uppercase + string.digits
ALNUM = string.ascii_letters + string.digits
# Synthetic, generated per run: shaped like the real thing, never a live credential.
SECRETS = {
    "aws": "AKIA" + _chars(UPPER, 16),
    "github": "ghp_" + _chars(ALNUM, 36),
    "dsn_password": _chars(ALNUM, 18),
    "slack": "xoxb-" + _chars(string.digits, 12) + "-" + _chars(ALNUM, 24),
}
MARKER = "QUOKKA-" + _chars(UPPER, 10)
META_MARKER = "WOMBAT-" + _chars(UPPER, 10)
QUERY_MARKER = "NUMBAT-" + _chars(UPPER, 10)
KEY_MARKER = "DINGO-" + _chars(UPPER, 10)
FORBIDDEN = [MARKER, META_MARKER, QUERY_MARKER, KEY_MARKER, *SECRETS.values()]

CONTENT = (f"{MARKER} my AWS key is {SECRETS['aws']} and the token {SECRETS['github']}; "
           f"db postgres://app:{SECRETS['dsn_password']}@db.internal:5432/prod, slack "
           f"{SECRETS['slack']}")


class Observed:
    def __init__(self) -> None:
        self.events = InMemoryEventSink()
        self.spans = InMemorySpanExporter()
        self.tracer = TracerProvider()
        self.tracer.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        self.meter = MeterProvider(metric_readers=[self.metrics])

    def manager(self, profile: str, plugins: PluginManager, trail: Path,
                **kwargs: Any) -> GovernedMemoryManager:
        return GovernedMemoryManager.from_profile(
            profile, plugins=plugins, clock=ManualClock(),
            sinks=[self.events, AuditSink(trail)], tracer_provider=self.tracer,
            meter_provider=self.meter, provider_config_overrides={"backend": "memory"},
            **kwargs)

    def metric_labels(self) -> list[dict[str, Any]]:
        data = self.metrics.get_metrics_data()
        labels = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    labels.append({"name": metric.name, "description": metric.description})
                    for point in metric.data.data_points:
                        labels.append(dict(point.attributes or {}))
        return labels


async def run_everything(manager: GovernedMemoryManager, *, strict: bool) -> None:
    """Every operation, with markers wherever a caller can put text."""
    key = f"key-{KEY_MARKER}"
    extra = {"idempotency_key": "idem-1"} if strict else {}
    metadata = {"note": f"{META_MARKER} {SECRETS['aws']}", f"{META_MARKER}-field": 1}

    async def attempt(call: Any) -> Any:
        try:
            return await call
        except GovernedMemoryError:
            return None

    record = await attempt(manager.add(ALICE, ALICE_SCOPE, CONTENT, key=key,
                                       metadata=metadata, **extra))
    if record is None:  # a profile that refuses credentials outright
        extra = {"idempotency_key": "idem-2"} if strict else {}
        record = await manager.add(ALICE, ALICE_SCOPE, f"{MARKER} plain content",
                                   key=key, metadata={"note": META_MARKER}, **extra)
    await manager.get(ALICE, ALICE_SCOPE, key=key)
    await manager.get(ALICE, ALICE_SCOPE, record.id)
    await manager.list(ALICE, ALICE_SCOPE)
    for _ in range(2):  # the second may be a cache hit
        await manager.search(ALICE, ALICE_SCOPE, f"{QUERY_MARKER} {MARKER} {SECRETS['aws']}")
    await attempt(manager.update(
        ALICE, ALICE_SCOPE, record.id, expected_revision=record.revision,
        content=f"{MARKER} updated {SECRETS['github']}", metadata=metadata,
        **({"idempotency_key": "idem-3"} if strict else {})))
    await attempt(manager.history(ALICE, ALICE_SCOPE, record.id))
    await attempt(manager.history(ADMIN, ALICE_SCOPE, record.id))
    await attempt(manager.update(ALICE, ALICE_SCOPE, record.id,
                                 expected_revision=record.revision, content=MARKER,
                                 **({"idempotency_key": "idem-4"} if strict else {})))
    await attempt(manager.add(ALICE, ALICE_SCOPE, MARKER, importance=7))  # invalid
    await attempt(manager.add(ALICE, ALICE_SCOPE.replace(user_id="bob"), CONTENT))  # denied
    web = await attempt(manager.add(
        ALICE, ALICE_SCOPE, f"{MARKER} from the web",
        provenance=Provenance(source_type="web", source_id=f"https://x/{MARKER}"),
        **({"idempotency_key": "idem-5"} if strict else {})))
    if web is not None:
        await attempt(manager.approve(ADMIN, ALICE_SCOPE, web.id,
                                      **({"idempotency_key": "idem-6"} if strict else {})))
    current = await manager.get(ALICE, ALICE_SCOPE, record.id)
    await manager.delete(ALICE, ALICE_SCOPE, record.id, expected_revision=current.revision,
                         **({"idempotency_key": "idem-7"} if strict else {}))
    await manager.purge_expired(ADMIN, ALICE_SCOPE)
    await manager.delete_all(ADMIN, ALICE_SCOPE)
    await manager.delete_user(ADMIN, "acme", "alice")


class Crash:
    """Wraps a provider so ``add`` raises with content in its message, as a careless
    driver might."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def add(self, request: AddRequest, ctx: OperationContext) -> Any:
        raise RuntimeError(f"constraint failed for {request.content} {request.metadata}")


async def test_no_marker_or_secret_reaches_events_trail_spans_metrics_or_logs(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    plugins = PluginManager.load()
    seen = Observed()
    trails = []
    for profile, strict in (("chat-assistant@1.0.0", False), ("local@1.0.0", False),
                            ("compliance-strict@1.0.0", True)):
        trail = tmp_path / profile
        trails.append(trail)
        async with seen.manager(profile, plugins, trail) as manager:
            await run_everything(manager, strict=strict)
    crashing = tmp_path / "crash"
    trails.append(crashing)
    manager = seen.manager("local@1.0.0", plugins, crashing)
    manager.activity._provider = Crash(manager._provider)  # type: ignore[assignment]
    async with manager:
        with pytest.raises(GovernedMemoryError):
            await manager.add(ALICE, ALICE_SCOPE, f"{MARKER} crash", metadata={"n": META_MARKER})

    assert len(seen.events.events) > 60
    types = set(seen.events.types())
    for expected in ("memory.write.committed", "memory.read.completed",
                     "memory.write.rejected", "memory.write.failed", "memory.cache.hit"):
        assert expected in types, expected
    surfaces: dict[str, str] = {
        "events": "\n".join(event.to_json() for event in seen.events.events),
        "trail files": "\n".join(path.read_text() for trail in trails
                                 for path in sorted(trail.glob("audit-*.jsonl"))),
        "spans": json.dumps([
            {"name": span.name, "status": str(span.status.description),
             "attributes": {k: str(v) for k, v in (span.attributes or {}).items()},
             "events": [(e.name, {k: str(v) for k, v in (e.attributes or {}).items()})
                        for e in span.events]}
            for span in seen.spans.get_finished_spans()]),
        "metric labels": json.dumps(seen.metric_labels(), default=str),
        "logs": "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}"
                          for r in caplog.records),
    }
    assert len(seen.spans.get_finished_spans()) > 60
    assert "governed_memory.operations" in surfaces["metric labels"]
    assert "governed_memory.cache.hits" in surfaces["metric labels"]
    assert caplog.records  # the crash and the failed history were logged
    for surface, text in surfaces.items():
        for marker in FORBIDDEN:
            assert marker not in text, f"{marker[:8]}… leaked into {surface}"
    for trail in trails:
        assert verify_trail([trail]).ok


async def test_content_reaches_spans_only_when_the_profile_opts_in(tmp_path: Path) -> None:
    plugins = PluginManager.load()
    from governed_memory.profiles import ProfileRegistry

    base = ProfileRegistry.from_plugins(plugins).get("local@1.0.0")
    opted = attrs.evolve(base, privacy=attrs.evolve(base.privacy,
                                                    capture_content_in_traces=True))
    seen = Observed()
    manager = seen.manager(opted, plugins, tmp_path / "trail")  # type: ignore[arg-type]
    async with manager:
        await manager.add(ALICE, ALICE_SCOPE, f"{MARKER} opted in")
        await manager.search(ALICE, ALICE_SCOPE, QUERY_MARKER)
    spans = {s.name.split()[0]: s for s in seen.spans.get_finished_spans()}
    assert spans["create_memory"].attributes["governed_memory.content"] == f"{MARKER} opted in"
    assert spans["search_memory"].attributes["governed_memory.query.text"] == QUERY_MARKER
    trail = "\n".join(e.to_json() for e in seen.events.events)
    assert MARKER not in trail and QUERY_MARKER not in trail  # events never carry it

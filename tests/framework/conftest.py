"""Fixtures for governed-pipeline tests: a manager over the native in-memory backend
with a captured event sink, an in-memory span exporter and a manual clock (shared with
other folders through ``manager_fixtures``)."""

from __future__ import annotations

from manager_fixtures import clock, manager, sink, spans, tracer_provider

__all__ = ["clock", "manager", "sink", "spans", "tracer_provider"]

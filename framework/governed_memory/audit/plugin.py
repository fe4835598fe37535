"""The built-in event sinks, registered through the ordinary sink hook.

``PluginManager.load()`` registers this module alongside the entry-point plugins, so a
host (or a profile's ``[audit]`` section, see ``governed_memory.sinks``) finds each sink
by name exactly as it would a third-party one::

    sink = PluginManager.load().sinks.get("audit").factory({"directory": "trail"})

``audit`` is the hash-chained trail an auditor verifies; ``jsonl`` is a plain JSON lines
event log (no chain: ``audit verify`` calls it "not a hash-chained trail").
"""

from __future__ import annotations

from collections.abc import Callable

from governed_memory.hookspecs import hookimpl

PLUGIN_NAME = "governed_memory.builtin"


@hookimpl
def register_event_sinks(register: Callable[..., None]) -> None:
    from governed_memory.audit.sink import audit_sink_from_config
    from governed_memory.events import jsonl_sink_from_config

    register("audit", audit_sink_from_config,
             description="hash-chained JSON lines trail (governed-memory audit verify)")
    register("jsonl", jsonl_sink_from_config,
             description="plain JSON lines event log, one event per line (no hash chain)")

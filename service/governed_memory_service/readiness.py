"""``/readyz``: whether this process can serve requests now, by asking everything a
request needs for a real round trip.

Liveness (``/healthz``) only says the process answers; a load balancer that restarted
a process whenever its database blinked would turn one outage into many. Readiness
says whether to send it traffic: every check runs, concurrently, each bounded by
``timeout_s``, and any failure is ``503`` with ``Retry-After``:

- **storage**: ``manager.health()``, the provider's own probe (a round trip to its
  database);
- **sinks**: every event sink that offers
  :class:`~governed_memory.events.CheckableEventSink` (its own round trip to where it
  records); a sink without it is named ``unchecked``, never counted as ready or not;
- **keys**: the authenticator's verifiers that offer ``check`` (the API key store: a
  read of its table), since no request can be authenticated without them.

The body names each check's outcome (``ok``, ``unavailable``, ``unchecked``) and no
more: no error message (it could name hosts or paths), no count of records, and no
credentials are needed to ask.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, Final

from governed_memory import GovernedMemoryManager
from governed_memory.events import CheckableEventSink

__all__ = ["READY_TIMEOUT_S", "RETRY_AFTER_S", "readiness"]

log = logging.getLogger(__name__)

READY_TIMEOUT_S: Final = 5.0
RETRY_AFTER_S: Final = 5
"""Seconds a client (or balancer) is told to wait after a 503 before trying again."""
OK: Final = "ok"
UNAVAILABLE: Final = "unavailable"
UNCHECKED: Final = "unchecked"


async def _outcome(what: str, check: Awaitable[object], timeout_s: float) -> str:
    try:
        async with asyncio.timeout(timeout_s):
            await check
    except Exception as exc:  # a check reports failure, it never raises
        log.warning("readiness: %s failed: %s", what, type(exc).__name__)
        return UNAVAILABLE
    return OK


async def _storage(manager: GovernedMemoryManager, timeout_s: float) -> tuple[str, str]:
    """The provider's probe: its outcome, and the provider's name."""
    try:
        async with asyncio.timeout(timeout_s):
            health = await manager.health()
    except Exception as exc:
        log.warning("readiness: storage failed: %s", type(exc).__name__)
        return UNAVAILABLE, _provider_name(manager)
    return (OK if health.ok else UNAVAILABLE), health.provider


async def readiness(manager: GovernedMemoryManager, authenticator: Any, *,
                    timeout_s: float = READY_TIMEOUT_S) -> tuple[bool, dict[str, Any]]:
    """Whether the app is ready, and the body ``/readyz`` answers with."""
    sinks = list(manager.events.sinks)
    checked = [sink for sink in sinks if isinstance(sink, CheckableEventSink)]
    verifiers = [v for v in getattr(authenticator, "verifiers", ())
                 if callable(getattr(v, "check", None))]
    (storage, provider), *outcomes = await asyncio.gather(
        _storage(manager, timeout_s),
        *(_outcome(f"sink {_name(s)}", s.check(), timeout_s) for s in checked),
        *(_outcome("keys", v.check(), timeout_s) for v in verifiers))
    sink_states = iter(outcomes[:len(checked)])
    key_states = outcomes[len(checked):]
    sink_report = [{"name": _name(sink),
                    "status": next(sink_states) if isinstance(sink, CheckableEventSink)
                    else UNCHECKED} for sink in sinks]
    keys = (UNCHECKED if not key_states
            else OK if all(state == OK for state in key_states) else UNAVAILABLE)
    ready = (storage == OK and keys != UNAVAILABLE
             and all(s["status"] != UNAVAILABLE for s in sink_report))
    return ready, {"status": "ready" if ready else "unavailable", "provider": provider,
                   "checks": {"storage": storage, "sinks": sink_report, "keys": keys}}


def _name(sink: object) -> str:
    name = getattr(sink, "name", None)
    return name if isinstance(name, str) and name else type(sink).__name__


def _provider_name(manager: GovernedMemoryManager) -> str:
    spec = manager.profile_spec
    return spec.provider.name if spec is not None else "unknown"

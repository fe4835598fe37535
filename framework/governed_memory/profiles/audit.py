"""Where a profile's events are recorded (``[audit]``): the hash-chained trail, other
registered event sinks, and whether recording is mandatory.

Every key but ``fail_closed`` and ``sinks`` tunes the trail, so a key that would tune a
trail the profile does not name is refused rather than ignored.
"""

from __future__ import annotations

import enum
import types
from collections.abc import Mapping
from typing import Any, Final

import attrs

from governed_memory.profiles.problems import (
    ProfileProblem,
    check_at_least_one,
    check_positive,
    checked_config,
)


class FsyncPolicy(enum.StrEnum):
    """When the hash-chained trail flushes an entry to disk."""

    ALWAYS = "always"
    INTERVAL = "interval"
    NEVER = "never"


AUDIT_SINK: Final = "audit"
"""The registered name of the hash-chained trail's sink, which ``[audit] path`` configures."""
_MIN_AUDIT_FILE_BYTES: Final = 4096


def _sink_configs(value: Mapping[str, Mapping[str, Any]] | None
                  ) -> Mapping[str, Mapping[str, Any]]:
    return types.MappingProxyType({name: checked_config(config, f"sinks.{name}")
                                   for name, config in (value or {}).items()})


def _check_path(path: str, value: str | None) -> None:
    if value is not None and (not value.strip() or "\x00" in value):
        raise ProfileProblem(path, "must be a non-empty file system path")


@attrs.frozen(slots=True)
class AuditSection:
    """The profile's event sinks, and whether they are mandatory.

    ``path`` names the directory of the hash-chained trail (the built-in ``audit``
    sink) and the keys after it tune that trail; ``sinks`` configures any other
    registered event sink by name. ``governed_memory.sinks.build_sinks`` builds them,
    resolving relative paths against a base directory the host chooses (the CLI: the
    directory of its database). Every key but ``fail_closed`` and ``sinks`` configures
    the trail, so naming one without ``path`` is refused rather than ignored.
    """

    fail_closed: bool = False
    """Refuse any operation whose ``requested`` event the manager's sinks cannot all
    record, before a policy or the provider sees it (``AuditUnavailableError``). It
    needs something to record to: a profile with it and neither ``path`` nor ``sinks``
    is refused when it loads. See ``docs/compliance.md``."""
    path: str | None = None
    """The trail's directory (``audit-000001.jsonl``, … go in it)."""
    fsync: FsyncPolicy = FsyncPolicy.ALWAYS
    fsync_interval_s: float | None = None
    """Only with ``fsync = "interval"``: the longest an entry waits for its flush
    (1 s when unset)."""
    max_file_bytes: int | None = None
    """Rotate to the next file past this size (64 MiB when unset; at least 4096)."""
    checkpoint_path: str | None = None
    """A file the trail appends a checkpoint to every ``checkpoint_every`` entries.
    A checkpoint proves most when kept where the trail's writers cannot reach."""
    checkpoint_every: int | None = None
    sinks: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict,
                                                         converter=_sink_configs)
    """Other registered event sinks, by name, each with its config table."""

    def __attrs_post_init__(self) -> None:
        _check_path("path", self.path)
        _check_path("checkpoint_path", self.checkpoint_path)
        if self.fail_closed and self.path is None and not self.sinks:
            # Otherwise it loads, and then every operation is refused for want of a sink.
            raise ProfileProblem("path", "fail_closed = true needs a trail to record to: "
                                         "name its directory here (relative to the "
                                         "database's directory), or an "
                                         "[audit.sinks.<name>] table")
        if self.path is None:
            for name in ("fsync_interval_s", "max_file_bytes", "checkpoint_path",
                         "checkpoint_every"):
                if getattr(self, name) is not None:
                    raise ProfileProblem(name, "configures the hash-chained trail, but "
                                               "audit.path names none")
            if self.fsync is not FsyncPolicy.ALWAYS:
                raise ProfileProblem("fsync", "configures the hash-chained trail, but "
                                              "audit.path names none")
        if self.fsync_interval_s is not None:
            if self.fsync is not FsyncPolicy.INTERVAL:
                raise ProfileProblem("fsync_interval_s", 'only applies with fsync = '
                                                         '"interval"')
            check_positive("fsync_interval_s", self.fsync_interval_s)
        if self.max_file_bytes is not None and self.max_file_bytes < _MIN_AUDIT_FILE_BYTES:
            raise ProfileProblem("max_file_bytes", f"must be at least "
                                                   f"{_MIN_AUDIT_FILE_BYTES}, got "
                                                   f"{self.max_file_bytes}")
        check_at_least_one("checkpoint_every", self.checkpoint_every)
        if (self.checkpoint_every is None) != (self.checkpoint_path is None):
            missing = "checkpoint_path" if self.checkpoint_path is None else "checkpoint_every"
            present = "checkpoint_every" if missing == "checkpoint_path" else "checkpoint_path"
            raise ProfileProblem(present, f"needs {missing} too")
        for name in self.sinks:
            if not name:
                raise ProfileProblem("sinks", "a sink name must not be empty")
            if name == AUDIT_SINK:
                raise ProfileProblem(f"sinks.{name}", "the hash-chained trail is configured "
                                                      "by audit.path and the keys beside it")

    @property
    def trail_config(self) -> dict[str, Any] | None:
        """The ``audit`` sink's config for ``path`` (as written, unresolved), or
        ``None`` when the profile names no trail."""
        if self.path is None:
            return None
        config: dict[str, Any] = {"directory": self.path, "fsync": self.fsync.value}
        for name in ("fsync_interval_s", "max_file_bytes", "checkpoint_path",
                     "checkpoint_every"):
            value = getattr(self, name)
            if value is not None:
                config[name] = value
        return config

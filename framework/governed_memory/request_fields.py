"""The field rules several long-term requests share.

An add and an update both carry times and entities, every write addressed to one record
carries its id, revision and idempotency key: each rule is written once, here, so two
requests refuse the same value with the same message and the same ``field``.
"""

from __future__ import annotations

from governed_memory.errors import MemoryValidationError
from governed_memory.limits import (
    MAX_ENTITY_IDS,
    MAX_EPOCH_SECONDS,
    MAX_IDEMPOTENCY_KEY_BYTES,
    check_identifier,
    check_text,
    is_real,
)


def check_optional_text(value: str | None, field: str, max_bytes: int) -> None:
    if value is not None:
        check_text(value, field, max_bytes=max_bytes)


def check_time(value: float | None, field: str) -> None:
    if value is None:
        return
    if not is_real(value):  # a bool, a non-number, NaN, an infinity or an int past 1e308
        raise MemoryValidationError(f"{field} must be finite UTC epoch seconds", field=field)
    if value < 0:
        raise MemoryValidationError(f"{field} must not be negative", field=field)
    if value > MAX_EPOCH_SECONDS:
        raise MemoryValidationError(
            f"{field} is past the year 9999 ({MAX_EPOCH_SECONDS:.0f}): not a date", field=field)


def check_record_id(value: object, field: str = "record_id") -> None:
    check_identifier(value, field)


def check_record_write(record_id: object, expected_revision: str | None,
                       idempotency_key: str | None) -> None:
    """What every write addressed to one existing record carries."""
    check_record_id(record_id)
    check_optional_text(expected_revision, "expected_revision", 256)
    check_optional_text(idempotency_key, "idempotency_key", MAX_IDEMPOTENCY_KEY_BYTES)


def check_similarity(value: float, field: str = "dedup_threshold") -> None:
    """A similarity threshold: a real number in ``(0, 1]``."""
    if not is_real(value) or not 0 < value <= 1:
        raise MemoryValidationError(f"{field} must be in (0, 1]", field=field)


def check_entities(entity_ids: tuple[str, ...]) -> None:
    if len(entity_ids) > MAX_ENTITY_IDS:
        raise MemoryValidationError(
            f"entity_ids has {len(entity_ids)} entries; the limit is {MAX_ENTITY_IDS}",
            field="entity_ids",
        )
    for i, entity in enumerate(entity_ids):
        check_identifier(entity, f"entity_ids[{i}]")

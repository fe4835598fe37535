"""The in-memory backend: deterministic and transactional, for tests and ephemeral use."""

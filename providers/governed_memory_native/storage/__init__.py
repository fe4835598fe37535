"""The storage port: the seam between the provider's decisions and a datastore's rows.

The provider decides (scopes, versions, idempotency, erasure); a backend only stores and
reads. What crosses between them is defined here (the port's protocols, the
repositories, the values, stored revisions, schema-migration bookkeeping and record
copies), so every backend, in memory or in SQL, answers to the same contract.
"""

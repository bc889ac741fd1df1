"""The reconcile loop as phases (see docs/architecture.md, "The reconciler"): sync (adopt, observe),
garbage collection, decide, a pure plan, act (creates with failover, drains and deletes, routes) and
record. ``loop.Reconciler`` composes them into a tick over one unit of work."""

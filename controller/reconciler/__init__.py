"""The reconcile loop, one concern per module: lifecycle (sync with providers), scale (decide and act),
placement (which offer), garbage collection (orphans). ``loop.Reconciler`` composes them into a tick."""

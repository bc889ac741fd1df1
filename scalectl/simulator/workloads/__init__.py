"""Workloads: what each tier is asked to do over virtual time (YAML spec, shapes, traces, sources)."""

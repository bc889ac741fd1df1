"""Fleet simulator models: a calibrated vLLM-on-GPU instance model, workloads, the fleet, baselines, reports.

Everything here runs on virtual time passed in by the caller; nothing reads the wall clock.
"""

"""The decision core: a pipeline of small estimators (demand → capacity → sizing → behaviour).

The tier limits (min/max, budget) follow in policies/engine.py, as for every policy.

Pure like the rest of ``policies``: no I/O, no clock reads (``now`` is an argument). docs/decision-core.md
describes the stages; every constant lives in ``constants.py``.
"""

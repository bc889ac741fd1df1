"""The decision core: a pipeline of small estimators (demand → capacity → sizing → behaviour → guards).

Pure like the rest of ``policies``: no I/O, no clock reads (``now`` is an argument). docs/decision-core.md
describes the stages; every constant lives in ``constants.py``.
"""

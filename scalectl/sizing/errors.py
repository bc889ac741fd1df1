"""Sizing errors: each message says what was asked, why it cannot work, and what would fit instead."""

from __future__ import annotations


class SizingError(ValueError):
    """Bad sizing input. ``str()`` is a sentence with the fix."""


class UnknownModel(SizingError):
    pass


class ContextTooLong(SizingError):
    """The requested max-model-len does not fit; ``largest_fit`` is the largest that does (0 if none)."""

    def __init__(self, message: str, largest_fit: int):
        super().__init__(message)
        self.largest_fit = largest_fit


class Fp8Unsupported(SizingError):
    pass


class WeightsDoNotFit(SizingError):
    pass

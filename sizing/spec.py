"""What a tier serves (the ``serving:`` block): the model and the traffic it is sized for."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ServingSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    max_model_len: int = Field(4096, gt=0)
    target_concurrency: int = Field(100, gt=0)
    session_affinity: bool = False  # multi-turn tiers: route a session to the same instance

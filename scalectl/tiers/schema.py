"""The JSON Schema of the tiers file, generated from the pydantic models that validate it (one source of
truth). Published as docs/tiers.schema.json for editors; `scalectl schema` prints it."""

from __future__ import annotations

import json
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from scalectl.policies.durations import parse_duration
from scalectl.tiers.config import FleetConfig

SCHEMA_ID = "https://github.com/scalectl/scalectl/blob/main/docs/tiers.schema.json"
# "500ms", "30s", "5m", "1h30m", or seconds as a number (policies.durations.parse_duration).
DURATION = {
    "anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^ *(\d+(\.\d+)? *(ms|s|m|h|d) *)+$|^ *\d+(\.\d+)? *$"},
    ],
    "description": 'A duration: "500ms", "30s", "5m", "1h30m", or seconds as a number.',
}


class _TiersSchema(GenerateJsonSchema):
    """Durations are validated by a function the default generator can't see through: describe them."""

    def function_before_schema(self, schema: core_schema.BeforeValidatorFunctionSchema) -> JsonSchemaValue:
        if getattr(schema.get("function"), "get", lambda _: None)("function") is parse_duration:
            return dict(DURATION)
        return super().function_before_schema(schema)


def tiers_schema() -> dict[str, Any]:
    schema = FleetConfig.model_json_schema(schema_generator=_TiersSchema)
    schema["properties"]["version"] = {  # tiers/config.py: _without_read_only
        "description": "Read-only: the stored version `scalectl get tiers` printed; `apply` ignores it.",
        "anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}],
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "scalectl tiers file",
        "description": "Tiers, their policies and signals, and provider accounts (docs/configuration.md).",
        **{k: v for k, v in schema.items() if k not in ("title", "description")},
    }


def tiers_schema_text() -> str:
    return json.dumps(tiers_schema(), indent=2, sort_keys=True) + "\n"

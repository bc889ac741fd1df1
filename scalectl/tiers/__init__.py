"""The tiers file: the fleet's configuration (TierSpec), its loader, validation, JSON Schema and server description."""

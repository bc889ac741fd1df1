"""Provider adapters: one small interface, typed values, one error taxonomy, one adapter per cloud."""

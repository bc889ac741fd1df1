"""High availability: a leader lease with epochs and fencing (PostgreSQL), one daemon per SQLite file."""

"""the configuration is stored once: drop the per-tier JSON copy (table tiers)

Tier specs are read from the text of the latest config version (config_versions.text), the form
`scalectl apply` stored anyway. Downgrading rebuilds the table from that text.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
import yaml
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_table("tiers")


def downgrade() -> None:
    tiers = op.create_table(
        "tiers",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("config_version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["config_version"], ["config_versions.version"], name=op.f("fk_tiers_config_version_config_versions")
        ),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_tiers")),
    )
    latest = op.get_bind().execute(
        sa.text("SELECT version, applied_at, text FROM config_versions ORDER BY version DESC LIMIT 1")
    ).first()
    if latest is None:
        return
    # A migration is frozen history: it reads the stored text itself instead of importing today's parser.
    # Each tier is stored as written; the code of revision 0002 validated a spec when it read one.
    tiers_written = (yaml.safe_load(latest.text) or {}).get("tiers") or {}
    rows = [
        {
            "name": name,
            "spec": spec,
            "config_version": latest.version,
            "updated_at": latest.applied_at,
            "active": True,
        }
        for name, spec in tiers_written.items()
    ]
    op.bulk_insert(tiers, rows)

"""tier controls: per tier, an override of the desired count with an optional expiry (`scalectl scale`)
and a pause flag (`scalectl pause`)

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tier_controls",
        sa.Column("tier", sa.String(length=64), nullable=False),
        sa.Column("override_count", sa.Integer(), nullable=True),
        sa.Column("override_until", sa.Float(), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("tier", name=op.f("pk_tier_controls")),
    )


def downgrade() -> None:
    op.drop_table("tier_controls")

"""world clock: the daemon publishes its (possibly accelerated) clock for the CLI

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "world_clock",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("speed", sa.Float(), nullable=False),
        sa.Column("world_at", sa.Float(), nullable=False),
        sa.Column("wall_at", sa.Float(), nullable=False),
        sa.Column("running", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_world_clock")),
    )


def downgrade() -> None:
    op.drop_table("world_clock")

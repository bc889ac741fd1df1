"""rollouts: each instance records the hash of the server it was launched with; per tier, a rollout
generation (`scalectl rollout restart` bumps it) and a pause flag

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("server_hash", sa.String(length=16), nullable=True))
    op.create_table(
        "rollouts",
        sa.Column("tier", sa.String(length=64), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("tier", name=op.f("pk_rollouts")),
    )


def downgrade() -> None:
    op.drop_table("rollouts")
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("server_hash")

"""instances.interrupted_at: when the reconciler saw a provider interrupt an instance

The spot back-off (interruptions per tier within a window) is derived from it at start, so a restarted
daemon keeps the back-off instead of forgetting it.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("interrupted_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("interrupted_at")

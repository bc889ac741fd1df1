"""instances.stopped_at, stopped_s, storage_per_hour: a stopped machine bills its disk, not its GPU

A row's cost was its GPU price from launch to end, stopped or not. A stopped stretch now bills the
provider's storage price (``storage_per_hour``, 0 where the provider publishes no single figure); the open
stretch began at ``stopped_at`` and ``stopped_s`` sums the closed ones.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("stopped_at", sa.Float(), nullable=True))
        batch.add_column(sa.Column("stopped_s", sa.Float(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("storage_per_hour", sa.Float(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("storage_per_hour")
        batch.drop_column("stopped_s")
        batch.drop_column("stopped_at")

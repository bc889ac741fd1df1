"""instances.running_at: when the provider first reported an instance running

With ``ready_at`` it splits a boot into its phases (create → running → serving): the ready event and the
``scalectl_boot_phase_seconds`` histogram report them, also for instances that became ready after a
restart of the daemon.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("running_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.drop_column("running_at")

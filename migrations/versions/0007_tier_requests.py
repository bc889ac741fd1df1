"""tier requests per minute: what cost per 1,000 requests (or tasks) is measured against

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tier_requests",
        sa.Column("tier", sa.String(length=64), nullable=False),
        sa.Column("minute", sa.Integer(), nullable=False),
        sa.Column("requests", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("tier", "minute", name=op.f("pk_tier_requests")),
    )


def downgrade() -> None:
    op.drop_table("tier_requests")

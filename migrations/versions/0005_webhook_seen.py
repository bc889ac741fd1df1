"""webhook replay guard: digests of accepted webhook requests

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 06:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhook_seen",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("seen_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_webhook_seen")),
    )
    op.create_index(op.f("ix_webhook_seen_seen_at"), "webhook_seen", ["seen_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_webhook_seen_seen_at"), table_name="webhook_seen")
    op.drop_table("webhook_seen")

"""`scalectl simulate`'s report sentences print whole: no rich markup eats a bracketed value, no width cuts one."""

from __future__ import annotations

from rich.console import Console

from scalectl.cli.simulate_cmd import print_lines


def test_a_long_warning_with_brackets_prints_whole_on_one_line() -> None:
    console = Console(record=True, width=40, color_system=None)
    warning = "tier chat: boots take [2m, 5m] and the spike [x3] arrives before any launch can serve it"
    print_lines(console, ["12 requests timed out [client_timeout 600s]"], [warning])
    text = console.export_text()
    assert text.splitlines() == [
        "12 requests timed out [client_timeout 600s]",
        f"warning: {warning}",
    ]

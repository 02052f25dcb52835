"""Every sub-command answers --help (INTERFACE.md)."""

from __future__ import annotations

import pytest

from flows.cli import COMMANDS, main


@pytest.mark.parametrize("command", [c[0] for c in COMMANDS])
def test_every_subcommand_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: tracelab {command}" in out
    assert "--data" in out

"""`handback dev` that cannot start says why, naming what failed, without a traceback."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from .dev_process import handback_main


def test_handback_dev_without_a_writable_temp_dir_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Root can write anywhere, so make the temp "dir" a file: nothing can be created under it.
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(blocked))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # `handback dev` run in this process, so that the test controls its temp dir.
    code = handback_main()(["dev", "--no-browser", "--port", "0"])
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot listen" not in err
    assert "store" in err and str(blocked) in err
    assert "Traceback" not in err

"""c10d.record and c10d.write_error_file: the JSON torchrun's agent reads, and nothing without a
launcher's file."""

import json

import pytest

import c10d


def test_record_writes_the_escaping_error_and_reraises(tmp_path, monkeypatch):
    path = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))

    @c10d.record
    def main():
        raise ValueError("boom \xff")

    with pytest.raises(ValueError):
        main()
    written = json.loads(path.read_text(encoding="utf-8"))
    message = written["message"]["message"]
    assert message.startswith("ValueError: boom")
    assert "test_errorfile.py" in message and "in main" in message
    assert written["message"]["extraInfo"]["timestamp"].isdigit()  # torchrun requires it


def test_without_a_launchers_file_nothing_is_written(monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_ERROR_FILE", raising=False)
    assert c10d.write_error_file("nobody reads this") is False

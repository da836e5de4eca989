"""`python -m anatomy check` and the command-line dispatcher."""

from anatomy import check
from anatomy.cli import main


def test_check_reports_chapter_counts_and_passes(capsys):
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "vanilla: 1,244,928 parameters" in out and "llama: 1,178,496 parameters" in out
    assert "all checks passed" in out and "FAIL" not in out


def test_check_fails_when_rope_breaks(monkeypatch, capsys):
    # If the correct RoPE lost its shift invariance, the check must say so and exit 1.
    real = check.llama_rope_shift_error
    monkeypatch.setattr(
        check, "llama_rope_shift_error", lambda rope_break="none": 1.0 if rope_break == "none" else real(rope_break)
    )
    assert main(["check"]) == 1
    assert "[FAIL] correct RoPE" in capsys.readouterr().out


def test_cli_without_command_prints_help(capsys):
    assert main([]) == 2
    assert "train" in capsys.readouterr().out


def test_after_a_double_dash_a_name_starting_with_a_dash_is_a_positional(tmp_path, monkeypatch, capsys):
    """`corpus --out OUT -- -posts`: the shell's convention for a folder named -posts."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-posts").mkdir()
    (tmp_path / "-posts" / "a.md").write_text("---\ntitle: a\n---\n学而时习之。\n", encoding="utf-8")
    assert main(["corpus", "--out", "out", "--", "-posts"]) == 0, capsys.readouterr().err
    assert (tmp_path / "out" / "corpus.txt").read_text(encoding="utf-8") == "学而时习之。"

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


def test_check_prints_each_part_of_2024_26_and_its_own_rows(capsys):
    assert main(["check"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.strip().startswith("part"))
    assert header.split()[1:] == ["vanilla", "llama", "llama+qk_norm", "llama+mla", "llama+moe"]
    table = lines[lines.index(header) + 1 :]
    rows = [line[:29].strip() for line in table[: table.index("")]]  # the part column, down to the blank line
    assert rows[-1] == "total"
    # each new row beside the part it belongs to
    assert rows[rows.index("attention (all layers)") + 1] == "QK-norm (all layers)"
    assert rows[rows.index("feed-forward (all layers)") + 1] == "router (all layers)"
    assert any(line.strip().startswith("[ok] MLA's decoupled RoPE") for line in lines)
    assert any("llama+moe: 2,802,560 parameters, 1,721,216 of them active per token" in line for line in lines)

"""The workflow's YAML files read strictly (anatomy/files/yaml_files.py): a duplicate key, an alias
and an oversized file are each one line naming the file; the shipped files read as PyYAML reads them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from anatomy.errors import AnatomyError
from anatomy.files.yaml_files import CONFIG_FILE_LIMIT, read_config_file

WORKFLOW = Path(__file__).resolve().parents[1] / "workflow"


def billion_laughs(levels: int = 9) -> str:
    """Nine lines that PyYAML expands to 9**9 strings once walked."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("path", sorted(WORKFLOW.glob("*.yaml")), ids=lambda path: path.name)
def test_the_shipped_config_files_read_as_pyyaml_reads_them(path):
    assert read_config_file(path) == yaml.safe_load(path.read_text(encoding="utf-8"))


def test_a_duplicate_key_names_the_file_the_key_and_both_lines(tmp_path):
    path = tmp_path / "experiments.yaml"
    path.write_text(
        "experiments:\n  llama:\n    preset: llama\n    train:\n      lr: 0.001\n      lr: 0.003\n", encoding="utf-8"
    )
    with pytest.raises(AnatomyError) as caught:
        read_config_file(path)
    assert str(caught.value) == f"{path}: the key 'lr' appears twice in one mapping (lines 5 and 6)"


def test_a_duplicate_key_in_json_is_refused_too(tmp_path):
    path = tmp_path / "extra.json"
    path.write_text('{\n\t"seeds": [1],\n\t"seeds": [2]\n}\n', encoding="utf-8")  # tabs: not YAML
    with pytest.raises(AnatomyError, match=r"extra.json: the key 'seeds' appears twice in one object"):
        read_config_file(path)
    path.write_text('{\n\t"seeds": [1]\n}\n', encoding="utf-8")
    assert read_config_file(path) == {"seeds": [1]}


def test_an_alias_bomb_is_refused_at_once_naming_the_line(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(billion_laughs(), encoding="utf-8")
    started = time.perf_counter()
    with pytest.raises(AnatomyError) as caught:
        read_config_file(path)
    assert time.perf_counter() - started < 1
    assert str(caught.value).startswith(f"{path}: line 2: the YAML alias *a0 is not taken here")


def test_a_file_past_the_limit_is_not_parsed(tmp_path):
    path = tmp_path / "experiments.yaml"
    path.write_text("notes:\n" + "  - lol\n" * (CONFIG_FILE_LIMIT // 8 + 1), encoding="utf-8")
    with pytest.raises(AnatomyError) as caught:
        read_config_file(path)
    assert str(caught.value) == (
        f"{path}: 1.0 MiB is more than a workflow config file (YAML or JSON) should hold (1.0 MiB at most), "
        "so it is not read"
    )


def test_bad_syntax_is_one_line_with_its_place(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("seeds: [1, 2\nprecision: fp32\n", encoding="utf-8")
    with pytest.raises(AnatomyError) as caught:
        read_config_file(path)
    assert str(caught.value).startswith(f"{path}: not valid YAML or JSON: line 2, column")
    assert "\n" not in str(caught.value)

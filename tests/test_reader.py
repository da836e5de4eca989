"""The one reader of a results database: it reads what collect stored, never config.json again,
and names a run one way (in English in the data, translated where a page shows it)."""

from __future__ import annotations

import duckdb
import pandas as pd

from anatomy.language import speaking
from anatomy.results.collect import collect
from anatomy.results.reader import load, run_label
from run_folders import LLAMA_PARTS, write_run_folder


def test_the_settings_come_from_the_columns_collect_stored_not_from_config_json(tmp_path):
    runs = tmp_path / "runs"
    write_run_folder(runs, "vanilla", 42)
    write_run_folder(runs, "llama", 42, model={**LLAMA_PARTS, "qk_norm": True}, train={"lr": 2e-3, "warmup_steps": 0})
    db = tmp_path / "a.duckdb"
    collect(runs, db)
    with duckdb.connect(str(db)) as con:  # what the reader must not need: the config it came from
        con.execute("""UPDATE runs SET config = '"gone"'""")
    settings = ["vocab_size", "d_model", "n_layer", "n_kv_head", "norm_pos", "qk_norm", "n_parts", "lr", "warmup_steps"]
    found = load(db).runs.set_index("run_id")[settings]
    assert found.loc["llama/seed42"].tolist() == [50, 16, 1, 2, "pre", True, 5, 2e-3, 0]
    assert found.loc["vanilla/seed42"].tolist() == [50, 16, 1, 4, "post", False, 0, 3e-4, 100]
    # whole numbers stay whole: the report formats them as such
    assert all(pd.api.types.is_integer_dtype(found[name]) for name in ("vocab_size", "n_parts", "warmup_steps"))


def test_a_run_is_named_in_english_in_the_data_and_in_the_readers_words_where_shown():
    with speaking("zh_CN"):
        assert run_label("llama", 42) == "llama · seed 42"  # a link's ?run= works in every language
        assert run_label("llama", 42, translated=True) == "llama · 种子 42"
        assert run_label("depth", None, translated=True) == "depth"
    assert run_label("llama", 42, translated=True) == "llama · seed 42"

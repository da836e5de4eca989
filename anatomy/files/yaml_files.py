"""The workflow's YAML files, read strictly: config.yaml, corpora.yaml, experiments.yaml and any
--configfile.

PyYAML, and so Snakemake, takes the last of two equal keys without a word (a second `lr:` in an
experiment silently replaces the first) and expands aliases without a limit: a "billion laughs"
file of a few lines parses at once into shared references, and whatever walks the config then
(the schema's check) runs until killed. Here a duplicate key is refused naming both lines, an
alias is refused (none of the workflow's files uses one; write the value out), and a file is
read only up to a size limit, before any parsing.
"""

from __future__ import annotations

import json
import os

import yaml

from anatomy.errors import AnatomyError
from anatomy.files.atomic import read_regular_file

# workflow/experiments.yaml, the largest, is 23 KB: a megabyte is forty times that, and still
# parses in a moment. A file past it is not a config someone wrote.
CONFIG_FILE_LIMIT = 1024**2
WHAT = "a workflow config file (YAML or JSON)"
MERGE_TAG = "tag:yaml.org,2002:merge"


class RefusedYaml(Exception):
    """A duplicate key or an alias: the message says where, read_config_file adds the file."""


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and duplicate keys."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            alias = self.peek_event()
            raise RefusedYaml(
                f"line {alias.start_mark.line + 1}: the YAML alias *{alias.anchor} is not taken here "
                "(an alias can expand without end); write the value out"
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self.refuse_duplicate_keys(node)
        return super().construct_mapping(node, deep=deep)

    def refuse_duplicate_keys(self, node: yaml.MappingNode) -> None:
        first_line: dict = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == MERGE_TAG:
                continue  # a merge key (<<) or a collection as key: PyYAML's own rules apply
            key, line = self.construct_object(key_node), key_node.start_mark.line + 1
            if key in first_line:
                raise RefusedYaml(f"the key {key!r} appears twice in one mapping (lines {first_line[key]} and {line})")
            first_line[key] = line


def unique_pairs(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object's pairs as a dict, refusing a key given twice (json keeps the last)."""
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise RefusedYaml(f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def yaml_problem(err: yaml.YAMLError) -> str:
    """PyYAML's error in one line, with its line and column."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {err.problem}"
    return str(err).replace("\n", " ")


def read_config_file(path: str | os.PathLike):
    """The content of a workflow config file: YAML, or JSON as Snakemake also takes it. One line
    naming the file for a file over CONFIG_FILE_LIMIT, a duplicate key, an alias or bad syntax."""
    data = read_regular_file(path, CONFIG_FILE_LIMIT, WHAT)
    try:
        try:
            return yaml.load(data, Loader=StrictLoader)
        except yaml.YAMLError as err:
            try:  # JSON that YAML does not read (tabs): Snakemake reads it as JSON
                return json.loads(data, object_pairs_hook=unique_pairs)
            except ValueError:
                raise AnatomyError(f"{path}: not valid YAML or JSON: {yaml_problem(err)}") from None
    except RefusedYaml as refused:
        raise AnatomyError(f"{path}: {refused}") from None

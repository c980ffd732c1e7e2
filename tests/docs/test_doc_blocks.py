"""The doc-test convention's parser and matcher (tests/docs/doc_blocks.py), without a broker."""

from __future__ import annotations

import pytest
from doc_blocks import blocks, matches


def test_marked_blocks_only_with_their_commands_and_output(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("text\n```\n$ eoslog not marked\n```\n<!-- doc-test -->\n```\n$ eoslog topics list\nnone\n"
                   "$ printf 'a\\n' \\\n    | eoslog produce t\nwrote 1 record to t\n```\n"
                   "<!-- doc-test -->\n```python\nx = 1\n```\n")
    shell, python = blocks(doc)
    assert (shell.language, shell.line, python.language, python.lines) == ("sh", 6, "python", ["x = 1"])
    [(first, out1), (second, out2)] = [(c.text, c.expected) for c in shell.commands()]
    assert (first, out1) == ("eoslog topics list", ["none"])
    assert (second, out2) == ("printf 'a\\n' \\\n    | eoslog produce t", ["wrote 1 record to t"])


@pytest.mark.parametrize("text", ["<!-- doc-test -->\nnot a fence\n", "<!-- doc-test -->\n```\n$ a\n",
                                  "<!-- doc-test -->\n```\noutput first\n```\n", "<!-- doc-test -->\n```\n```\n"])
def test_a_marked_block_that_cannot_run_is_an_error_not_a_skip(tmp_path, text):
    doc = tmp_path / "d.md"
    doc.write_text(text)
    with pytest.raises(ValueError):
        [block.commands() for block in blocks(doc) if block.language != "python"]


def test_ellipses():
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["a", "...", "b"], ["a", "b"])
    assert not matches(["a", "...", "d"], ["a", "b", "c"])
    assert matches(['{"timestamp": ..., "key": "k"}'], ['{"timestamp": 17, "key": "k"}'])
    assert not matches(['{"timestamp": ..., "key": "k"}'], ['{"timestamp": 17, "key": "j"}'])
    assert not matches(["a"], ["a", "b"]) and not matches(["a", "b"], ["a"])
    assert matches(["a  "], ["a"])  # trailing blanks do not count


def test_a_table_gap_is_any_gap_of_two_or_more_blanks():
    assert matches(["ID  PID  STATE"], ["ID  PID    STATE"])
    assert matches(["broker  1  ...  running"], ["broker  1  27678     running"])
    assert not matches(["ID  PID"], ["ID PID"]) and not matches(["ID PID"], ["ID  PID"])


def test_a_marker_names_a_known_harness(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("<!-- doc-test: cluster -->\n```\n$ a\n```\n<!-- doc-test -->\n```\n$ b\n```\n")
    assert [(b.harness, b.lines) for b in blocks(doc)] == [("cluster", ["$ a"]), ("broker", ["$ b"])]
    assert [b.lines for b in blocks(doc, "cluster")] == [["$ a"]]
    for typo in ("<!-- doc-test: clustre -->", "<!-- doc-test:cluster -->"):
        doc.write_text(f"{typo}\n```\n$ a\n```\n")
        with pytest.raises(ValueError):
            blocks(doc)


def test_a_here_document_belongs_to_its_command(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("<!-- doc-test -->\n```\n$ cat > a.properties <<'EOF'\nx=1\n$ not a command\nEOF\n$ cat a.properties\n"
                   "x=1\n```\n")
    [first, second] = blocks(doc)[0].commands()
    assert (first.text, first.expected) == ("cat > a.properties <<'EOF'\nx=1\n$ not a command\nEOF", [])
    assert (second.text, second.expected) == ("cat a.properties", ["x=1"])
    doc.write_text("<!-- doc-test -->\n```\n$ cat <<EOF\nx=1\n```\n")
    with pytest.raises(ValueError):
        blocks(doc)[0].commands()

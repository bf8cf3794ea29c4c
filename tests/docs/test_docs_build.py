"""``make docs`` fails when the docs are wrong: a broken link or anchor anywhere, the
changelog (included from ``CHANGELOG.md``) and the tutorials (notebooks) included, and says
which. The build runs as ``make docs`` runs it (``docs/_tools/build.py``): strict, with
MkDocs's INFO lines left out and its warnings shown. The broken links are planted in a copy
of the docs in a temporary folder; the real tree builds without a word.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # MkDocs in a process of its own, ~5 s a build

ROOT = Path(__file__).parents[2]
BUILD = ROOT / "docs" / "_tools" / "build.py"


def build(top: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    return subprocess.run(
        [sys.executable, str(BUILD), "-f", str(top / "mkdocs.yml"), "-d", str(site)],
        cwd=top,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_real_docs_build_strictly_without_a_line_of_output(tmp_path: Path) -> None:
    done = build(ROOT, tmp_path / "site")
    assert (done.returncode, done.stdout + done.stderr) == (0, "")
    changelog = (tmp_path / "site" / "reference" / "changelog.html").read_text()
    assert 'href="../concepts/performance.html' in changelog  # CHANGELOG.md's docs/... link


def copy_of_the_docs(top: Path) -> Path:
    """What the build reads: mkdocs.yml, docs/ (the tutorials' pages included), the
    changelog, and the package the API reference is made from (linked, not copied)."""
    top.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", top)
    shutil.copy(ROOT / "CHANGELOG.md", top)
    ignore = shutil.ignore_patterns("__pycache__", "notebook-output")
    shutil.copytree(ROOT / "docs", top / "docs", symlinks=True, ignore=ignore)
    (top / "churn_connector").symlink_to(ROOT / "churn_connector", target_is_directory=True)
    return top


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_a_broken_link_or_anchor_anywhere_fails_the_build_naming_it(tmp_path: Path) -> None:
    top = copy_of_the_docs(tmp_path / "copy")
    append(top / "docs" / "concepts" / "sandbox.md", "\n[a](gone.md), [b](ledger.md#gone-a)\n")
    append(top / "CHANGELOG.md", "\n- [c](docs/gone-c.md), [d](docs/concepts/ledger.md#gone-d)\n")
    notebook = top / "docs" / "tutorials" / "quickstart.ipynb"  # a tutorial's page
    nb = json.loads(notebook.read_text())
    cell = {"cell_type": "markdown", "id": "planted", "metadata": {}}
    nb["cells"].append({**cell, "source": ["[e](gone-e.ipynb), [f](../index.md#gone-f)"]})
    notebook.write_text(json.dumps(nb))

    done = build(top, tmp_path / "site")

    assert done.returncode == 1
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    planted = ["'gone.md'", "'#gone-a'", "'../gone-c.md'", "'#gone-d'", "'gone-e.ipynb'"]
    for link in [*planted, "'#gone-f'"]:
        assert sum(link in line for line in warnings) == 1, (link, done.stderr)
    assert len(warnings) == 6, done.stderr  # the planted ones, nothing else
    assert "Aborted with 6 warnings in strict mode!" in done.stderr + done.stdout
    assert "INFO" not in done.stderr + done.stdout


def test_an_included_files_links_are_made_relative_to_the_page_and_code_left_alone() -> None:
    spec = importlib.util.spec_from_file_location("hooks", ROOT / "docs" / "_tools" / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    text = (
        "[a](docs/concepts/ledger.md#the-file) [b](https://x.org/docs/a.md) [c](#top)\n"
        "```text\n[d](docs/index.md)\n```\n"
        "[e]: docs/install.md\n"
    )
    assert hooks.relink(text, ROOT, ROOT / "docs" / "reference") == (
        "[a](../concepts/ledger.md#the-file) [b](https://x.org/docs/a.md) [c](#top)\n"
        "```text\n[d](docs/index.md)\n```\n"
        "[e]: ../install.md\n"
    )

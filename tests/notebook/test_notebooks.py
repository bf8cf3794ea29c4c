"""The notebooks: walk-throughs that run top to bottom in a real Jupyter kernel, offline.

Each runs in a fresh kernel of this environment (a kernel spec of our own, so that a kernel
installed elsewhere on the machine is never picked up), with every warning shown, in a
temporary folder. A cell that raises fails the test, and so does anything on stderr, any
warning's text in an output, or a key in one. The committed files must be stripped (no
outputs, no execution counts, ids kept) and use only the package's public names.

``python tests/notebook/test_notebooks.py`` strips the notebooks in place (``make strip-notebooks``).
"""

from __future__ import annotations

import ast
import gc
import json
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

import churn_connector as cc
from churn_connector._notebook.palette import COLOURS

pytestmark = pytest.mark.e2e  # real HTTP or processes throughout


NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))
EXPECTED = {"quickstart", "data_quality", "backfill", "identities"}
CELL_TIMEOUT_S = 300
# a warning's class name (UserWarning, FutureWarning, TqdmWarning, ...) or tqdm's complaint
WARNING_TEXT = re.compile(r"\b[A-Z]\w*Warning\b|IProgress not found|Traceback")
KEY_PREFIX = "sk_test_"  # the sandbox's keys: never in an output


@pytest.fixture(scope="module")
def kernel_specs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``python3`` kernel spec for this interpreter, with every warning shown."""
    root = tmp_path_factory.mktemp("kernels")
    spec = root / "python3"
    spec.mkdir()
    argv = [sys.executable, "-W", "default", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "Python 3 (tests)", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    return root


def execute(nb: nbformat.NotebookNode, kernel_specs: Path, cwd: Path) -> None:
    specs = KernelSpecManager(kernel_dirs=[str(kernel_specs)])
    km = KernelManager(kernel_name="python3", kernel_spec_manager=specs)
    assert km.kernel_spec is not None and km.kernel_spec.argv[0] == sys.executable
    client = NotebookClient(
        nb, km=km, timeout=CELL_TIMEOUT_S, resources={"metadata": {"path": str(cwd)}}
    )
    client.execute()
    del client, km
    with warnings.catch_warnings():
        # jupyter_client leaves its closed kernel client's sockets to the garbage collector,
        # which warns about them; collected here, where that is known and harmless
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def outputs(nb: nbformat.NotebookNode) -> Iterator[tuple[str, dict[str, Any]]]:
    for cell in nb.cells:
        if cell.cell_type == "code":
            for output in cell.outputs:
                yield cell.id, output


def texts(output: dict[str, Any]) -> list[str]:
    if output["output_type"] == "stream":
        return [output["text"]]
    data = output.get("data", {})
    return [str(v) for k, v in data.items() if k.startswith("text/")]


def check_outputs(nb: nbformat.NotebookNode) -> None:
    for cell, output in outputs(nb):
        where = f"cell {cell!r}"
        assert output["output_type"] != "error", where
        if output["output_type"] == "stream":
            assert output["name"] != "stderr", f"{where} printed on stderr: {output['text']}"
        for text in texts(output):
            found = WARNING_TEXT.search(text)
            assert found is None, f"{where}: {found.group(0) if found else ''} in {text[:500]}"
            assert KEY_PREFIX not in text, f"{where} shows a key"


def progress_bars(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    """Each widget bar as it was left: its words, counts, value, total and colour."""
    by_id = {f"IPY_MODEL_{key}": model for key, model in _models(nb).items()}
    bars = []
    for box in (m for m in by_id.values() if m["model_name"] == "HBoxModel"):
        left, bar, right = (by_id[child]["state"] for child in box["state"]["children"])
        finished = "value" in bar and isinstance(bar["value"], str)  # the bar of parts
        bars.append(
            {
                "words": left["value"].replace("\u2007", " "),
                "counts": right["value"].replace("\u2007", " "),
                # a finished bar: its parts, (colour, share of the whole in %)
                "parts": [
                    (colour, float(width))
                    for width, colour in re.findall(
                        r"width:([\d.]+)%;height:100%;background:(#[0-9a-f]{6}|transparent)",
                        bar["value"],
                    )
                ]
                if finished
                else None,
            }
        )
    return bars


def _models(nb: nbformat.NotebookNode) -> dict[str, Any]:
    saved = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return dict(saved.get("state", {}))


ANSI = re.compile(r"\x1b\[[0-9;]*m")
OUTCOME_WORDS = re.compile(r"(✔ delivered|✘ with failures|⊘ with failures|↻ with failures|"
                           r"◷ with failures|↻ stopped|↷ no rows)")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_notebook_runs_in_a_kernel_without_errors_or_warnings(
    path: Path, kernel_specs: Path, tmp_path: Path
) -> None:
    nb = nbformat.read(path, as_version=4)
    probe = new_code_cell("import sys\nprint(sys.executable)")
    probe.id = "which-python"
    nb.cells.append(probe)
    execute(nb, kernel_specs, tmp_path)
    check_outputs(nb)
    # the kernel was this environment's Python, not one found elsewhere on the machine
    assert nb.cells[-1].outputs[0]["text"].strip() == sys.executable
    # every progress bar was left saying how its send ended
    for bar in progress_bars(nb):
        assert OUTCOME_WORDS.search(bar["words"]), bar
    if path.stem == "backfill":
        check_the_interrupted_backfill(nb)


def check_the_interrupted_backfill(nb: nbformat.NotebookNode) -> None:
    """The stopped run's bar and message agree with the exception's counts."""
    (said,) = [o["text"] for o in cell(nb, "first").outputs if o.get("name") == "stdout"]
    found = re.fullmatch(
        r"interrupted: ([\d,]+) of 200,004 rows delivered \("
        r"(?:([\d,]+) sent, ([\d,]+) skipped as already delivered; )?"
        r"([\d,]+) read, ([\d,]+) never read\)\n",
        said,
    )
    assert found, said
    delivered, read, unread = (int(found[k].replace(",", "")) for k in (1, 4, 5))
    assert read + unread == 200_004
    (stopped,) = [bar for bar in progress_bars(nb) if "stopped" in bar["words"]]
    # the same numbers as the exception's message
    assert f"{delivered:,} of 200,004 rows delivered" in stopped["counts"]
    if found[2] is not None:  # repeats among the rows delivered: both said, alike
        sent, skipped = int(found[2].replace(",", "")), int(found[3].replace(",", ""))
        assert sent + skipped == delivered
        assert f"{sent:,} sent · {skipped:,} skipped" in stopped["counts"]
    assert f"{unread:,} not read" in stopped["counts"]
    # the delivered part in the colour of sent, the failed rows in theirs, the unread blank
    colours = [colour for colour, _ in stopped["parts"]]
    assert colours[0] == COLOURS["sent"] and colours[-1] == "transparent"
    assert set(colours[1:-1]) == {COLOURS["invalid"], COLOURS["failed"]}
    assert abs(stopped["parts"][0][1] - 100 * delivered / 200_004) < 1


def cell(nb: nbformat.NotebookNode, cell_id: str) -> Any:
    return next(c for c in nb.cells if c.get("id") == cell_id)


SETUP = (
    "import pandas as pd\nimport churn_connector as cc\nfrom churn_connector import samples\n"
    "sb = cc.Sandbox().start()\nclient = cc.Client(sb.base_url, sb.api_key)\n"
    "events = samples.sample_events(pd.Timestamp.now(tz='UTC'), n_events=600, n_users=50)"
)
NO_WIDGETS = "import sys\nsys.modules['ipywidgets'] = None  # as if the notebook extra were missing"


@pytest.mark.slow
def test_a_notebook_shows_a_text_bar_without_ipywidgets_and_a_widget_with_it(
    kernel_specs: Path, tmp_path: Path
) -> None:
    cells = [
        NO_WIDGETS,
        SETUP,
        "client.send_events(events);",
        "del sys.modules['ipywidgets']",
        "client.send_events(events);",
        "sb.stop()",
    ]
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    execute(nb, kernel_specs, tmp_path)
    check_outputs(nb)
    text_bar = nb.cells[2].outputs
    assert {(o["output_type"], o.get("name")) for o in text_bar} == {("stream", "stdout")}
    end = [f for f in re.split(r"[\r\n]", "".join(o["text"] for o in text_bar)) if f.strip()][-1]
    assert "events ✘ with failures: |" in end and "597 of 601 rows delivered" in end
    assert "%" not in end  # a finished run is no share of itself
    assert "596 sent · 1 skipped · 4 invalid" in end
    widget = nb.cells[4].outputs[0]
    assert "application/vnd.jupyter.widget-view+json" in widget["data"]
    assert "0/601" in widget["data"]["text/plain"]  # the widget's first frame, with its total


@pytest.mark.slow
def test_the_widget_bar_ends_filled_to_what_was_delivered_in_the_outcomes_colour(
    kernel_specs: Path, tmp_path: Path
) -> None:
    cells = [
        SETUP,
        "res = client.send_events(events)",
        "clean = client.send_events(events[events.index < 10], ledger=None)",
        "counts = (res.counts, clean.counts)\nsb.stop()\ncounts",
    ]
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    execute(nb, kernel_specs, tmp_path)
    check_outputs(nb)
    first, second = progress_bars(nb)
    assert "597 of 601 rows delivered" in first["counts"]  # 596 sent and 1 skipped of 601
    assert "✘ with failures" in first["words"]
    assert "596 sent · 1 skipped · 4 invalid" in first["counts"]
    # the delivered part in the colour of sent, the invalid rows in theirs
    assert [colour for colour, _ in first["parts"]] == [COLOURS["sent"], COLOURS["invalid"]]
    assert round(first["parts"][0][1], 1) == round(100 * 597 / 601, 1)
    assert "10 of 10 rows delivered" in second["counts"]
    assert second["parts"] == [(COLOURS["sent"], 100.0)] and "✔ delivered" in second["words"]
    assert "10 sent" in second["counts"]


@pytest.mark.slow
def test_retries_in_a_notebook_show_in_the_bar_and_the_result_never_on_stderr(
    kernel_specs: Path, tmp_path: Path
) -> None:
    cells = [
        NO_WIDGETS,  # a text bar: every frame it drew is in the output
        SETUP,
        "sb.script_faults([cc.Fault('5xx')] * 3)\n"
        "with cc.instant_retries():\n"
        "    res = client.send_events(events, max_concurrency=1)\n"
        "res",
        "sb.stop()",
    ]
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    execute(nb, kernel_specs, tmp_path)
    check_outputs(nb)  # nothing on stderr: no red box
    outputs = nb.cells[2].outputs
    frames = "".join(o["text"] for o in outputs if o["output_type"] == "stream")
    assert "retrying after HTTP 503" in frames
    assert "3 retries]" in frames  # the bar's last frame counts them
    (shown,) = [o for o in outputs if o["output_type"] == "execute_result"]
    assert "(3 retries)" in shown["data"]["text/html"]


STOP_BUTTON = """
import _thread, threading, time
import pandas as pd
import churn_connector as cc
from churn_connector import samples

sb = cc.Sandbox(latency=0.2).start()
client = cc.Client(sb.base_url, sb.api_key, max_concurrency=2)
events = samples.sample_events(pd.Timestamp.now(tz='UTC'), n_events=2000, n_users=50)

def press_stop_once_stored(n):  # what the stop button does: interrupt the main thread
    def watch():
        deadline = time.monotonic() + 60
        while sb.stats()["stored"] < n and time.monotonic() < deadline:
            time.sleep(0.02)
        _thread.interrupt_main()
    threading.Thread(target=watch, daemon=True).start()
"""
CARELESS_CELL = """
press_stop_once_stored(200)
try:
    client.send_events(events, batch_size=50, progress=False)
except Exception as exc:  # a careless catch-all: it must not swallow the stop button
    print("swallowed", type(exc).__name__)
"""


@pytest.mark.slow
def test_the_stop_button_passes_a_catch_all_and_leaves_the_summary_and_rows(
    kernel_specs: Path, tmp_path: Path
) -> None:
    cells = [
        new_code_cell(STOP_BUTTON),
        new_code_cell(CARELESS_CELL, metadata={"tags": ["raises-exception"]}),
        new_code_cell(
            "import sys\nstopped = sys.last_value  # the exception the cell ended with\n"
            "print(type(stopped).__name__, len(stopped.rows),\n"
            "      stopped.counts['sent'] + stopped.counts['skipped'])"
        ),
        new_code_cell("%tb", metadata={"tags": ["raises-exception"]}),
        new_code_cell("sb.stop()"),
    ]
    nb = new_notebook(cells=cells)
    execute(nb, kernel_specs, tmp_path)
    (error,) = nb.cells[1].outputs
    assert error["output_type"] == "error"
    assert error["ename"] == "Interrupted"
    # one line, not a chained traceback through the package; %tb has the whole of it
    shown = [line for line in ANSI.sub("", "\n".join(error["traceback"])).splitlines() if line]
    assert shown == [
        "An exception has occurred, use %tb to see the full traceback.",
        f"Interrupted: {error['evalue']}",
    ]
    whole = ANSI.sub("", "\n".join(nb.cells[3].outputs[0]["traceback"]))
    assert "churn_connector" in whole and "KeyboardInterrupt" in whole
    found = re.fullmatch(
        r"interrupted: ([\d,]+) of ([\d,]+) rows delivered"
        r"(?: \(([\d,]+) sent, [\d,]+ skipped as already delivered\))?",
        error["evalue"],
    )
    assert found is not None, error["evalue"]
    sent, total = (int(n.replace(",", "")) for n in found.groups()[:2])  # sent: delivered
    assert 0 < sent < total
    # the next cell still has the accounting: every row, and what was delivered
    assert nb.cells[2].outputs[0]["text"].split() == ["Interrupted", str(total), str(sent)]


def test_there_are_the_four_walk_throughs() -> None:
    assert {p.stem for p in NOTEBOOKS} == EXPECTED


def strip(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook as committed: no outputs, counts or run metadata; cell ids kept."""
    for cell in nb.cells:
        cell.metadata = {}
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.metadata = {k: v for k, v in nb.metadata.items() if k in ("kernelspec", "language_info")}
    return nb


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_committed_notebook_is_stripped(path: Path) -> None:
    raw = path.read_text()
    nb = nbformat.reads(raw, as_version=4)
    nbformat.validate(nb)
    assert '"output_type"' not in raw, "run `make strip-notebooks`"
    assert nbformat.writes(strip(nb)) + "\n" == raw, "run `make strip-notebooks`"
    assert all(cell.get("id") for cell in nb.cells)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_notebook_uses_public_names_and_no_asserts(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    public = set(cc.__all__)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        for node in ast.walk(tree):
            assert not isinstance(node, ast.Assert), f"{path.stem}:{cell.id}: an assert"
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [a.name for a in node.names]
                assert not any(n.startswith("churn_connector._") for n in names), cell.id
                if isinstance(node, ast.ImportFrom) and node.module == "churn_connector":
                    assert {a.name for a in node.names} <= public, cell.id
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "cc"
            ):
                assert node.attr in public, f"{path.stem}:{cell.id}: cc.{node.attr}"


if __name__ == "__main__":  # make strip-notebooks
    for notebook in NOTEBOOKS:
        stripped = strip(nbformat.read(notebook, as_version=4))
        notebook.write_text(nbformat.writes(stripped) + "\n")
        print(f"stripped {notebook}")

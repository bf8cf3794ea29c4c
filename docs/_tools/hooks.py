"""MkDocs hooks (``hooks:`` in mkdocs.yml): what a strict build needs beyond MkDocs itself.

**Includes whose links still lead somewhere.** A line ``--8<-- "FILE"`` (the changelog page's
``--8<-- "CHANGELOG.md"``) is replaced by FILE, a path from the repository's top folder. The
file's relative links are written for where it lives (``docs/concepts/ledger.md`` in
``CHANGELOG.md``, so that they work when the repository is read); here each becomes relative
to the page that includes it (``../concepts/ledger.md``), anchor kept. MkDocs then checks the
included links like any other: one to a page or an anchor that does not exist, or to a file
outside ``docs/``, is a warning, and ``--strict`` fails on it. A missing FILE fails the build.

**The tutorials' links are checked.** MkDocs checks the links of Markdown pages only; the
notebooks (``tutorials/*.ipynb``) are rendered by mkdocs-jupyter, whose links nothing
checked. A relative link in a notebook's Markdown cell to a file that is not part of the
site, or to an anchor that a Markdown page does not have, is a warning here, worded as
MkDocs words its own.

**A site that works opened from disk.** Material's ``offline`` plugin writes the search
index as a script and starts search in an iframe, where a page read from ``file://`` cannot
start a worker; the shim that does it is loaded from unpkg.com, which an offline reader
cannot reach, so every page's ``<script>`` for it is pointed at the site's own copy
(``javascripts/iframe-worker-shim.js``, vendored with its licence). And a notebook's links
to another tutorial (``[backfill](backfill.ipynb)``), which mkdocs-jupyter leaves as they
are, lead to the rendered page (``backfill.html``), as a Markdown page's do: not to the raw
``.ipynb`` file.
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path, PurePosixPath
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import get_plugin_logger
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

log = get_plugin_logger(__name__)

INCLUDE = re.compile(r'^--8<--[ \t]+"(?P<path>[^"]+)"[ \t]*$', re.MULTILINE)
# an inline link's or image's target, [text](target "title"), and a reference definition
INLINE = re.compile(r"(?P<head>\]\(\s*<?)(?P<target>[^)\s>]+)")
DEFINITION = re.compile(r"^(?P<head>[ ]{0,3}\[[^\]]+\]:[ \t]*<?)(?P<target>\S+?)(?=>|\s|$)", re.M)
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
EXTERNAL = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//|#|/)")  # a scheme, an anchor, absolute
SHIM_URL = "https://unpkg.com/iframe-worker/shim"  # what the offline plugin's pages load
SHIM = "javascripts/iframe-worker-shim.js"  # the site's own copy
NOTEBOOK_HREF = re.compile(r'href="(?P<path>[^"#?:]+\.ipynb)(?P<anchor>#[^"]*)?"')
_notebook_pages: dict[str, str] = {}  # a notebook page's source path -> its page's URL


def on_page_markdown(
    markdown: str, *, page: Page, config: MkDocsConfig, files: Files, **kwargs: Any
) -> str:
    top = Path(config.config_file_path).parent
    page_folder = (Path(config.docs_dir) / page.file.src_uri).parent.resolve()

    def include(match: re.Match[str]) -> str:
        source = top / match["path"]
        if not source.is_file():
            raise PluginError(f"{page.file.src_uri}: the included file {source} does not exist")
        return relink(source.read_text(), source.parent, page_folder)

    return INCLUDE.sub(include, markdown)


def relink(text: str, written_in: Path, read_from: Path) -> str:
    """``text``'s relative links, written from the folder ``written_in``, made relative to
    ``read_from`` (outside fenced code blocks)."""

    def target(match: re.Match[str]) -> str:
        link = match["target"]
        if EXTERNAL.match(link):
            return match[0]
        path, hash_, anchor = link.partition("#")
        moved = posixpath.relpath((written_in / path).resolve().as_posix(), read_from.as_posix())
        return f"{match['head']}{moved}{hash_}{anchor}"

    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines(keepends=True):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence = opening[1]
        elif fence is not None and opening and opening[1].startswith(fence):
            fence = None
        elif fence is None:
            line = DEFINITION.sub(target, INLINE.sub(target, line))
        out.append(line)
    return "".join(out)


def on_env(env: Any, *, config: MkDocsConfig, files: Files, **kwargs: Any) -> Any:
    # every page is rendered by now, so the Markdown pages know their anchors
    for page_file in files.documentation_pages():
        if page_file.src_uri.endswith(".ipynb") and page_file.abs_src_path:
            for link in notebook_links(Path(page_file.abs_src_path)):
                check_link(page_file.src_uri, link, files)
    return env


def notebook_links(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text())["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return [m["target"] for m in (*INLINE.finditer(markdown), *DEFINITION.finditer(markdown))]


def check_link(src_uri: str, link: str, files: Files) -> None:
    if EXTERNAL.match(link):
        return
    path, _, anchor = link.partition("#")
    target_uri = posixpath.normpath(str(PurePosixPath(src_uri).parent / path))
    target = files.get_file_from_path(target_uri)
    if target is None:
        log.warning(
            f"Doc file '{src_uri}' contains a link '{link}', but the target '{target_uri}' "
            "is not found among documentation files."
        )
    elif (
        anchor
        and target.page is not None
        and target.src_uri.endswith(".md")  # a notebook's anchors are nbconvert's
        and anchor not in (target.page.present_anchor_ids or ())
    ):
        log.warning(
            f"Doc file '{src_uri}' contains a link '{link}', but the doc "
            f"'{target_uri}' does not contain an anchor '#{anchor}'."
        )


def on_files(files: Files, *, config: MkDocsConfig, **kwargs: Any) -> Files:
    _notebook_pages.clear()
    for page_file in files.documentation_pages():
        if page_file.src_uri.endswith(".ipynb"):
            _notebook_pages[page_file.src_uri] = page_file.url
    return files


def on_post_page(output: str, *, page: Page, config: MkDocsConfig, **kwargs: Any) -> str:
    output = output.replace(SHIM_URL, get_relative_url(SHIM, page.url))
    if not page.file.src_uri.endswith(".ipynb"):
        return output

    def rendered(match: re.Match[str]) -> str:
        target = posixpath.normpath(
            posixpath.join(posixpath.dirname(page.file.src_uri), match["path"])
        )
        url = _notebook_pages.get(target)
        if url is None:
            return match[0]
        return f'href="{get_relative_url(url, page.url)}{match["anchor"] or ""}"'

    return NOTEBOOK_HREF.sub(rendered, output)


def on_post_template(
    output: str, *, template_name: str, config: MkDocsConfig, **kwargs: Any
) -> str:
    # the 404 page, a template of its own, is a server's: its links are from the site's root
    return output.replace(SHIM_URL, f"/{SHIM}")

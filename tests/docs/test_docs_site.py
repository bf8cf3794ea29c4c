"""The built site as a reader without hosting reads it: opened from disk (``file://``).

Every link and asset of every page leads to a file of the site (an anchor to an id of its
page), nothing is loaded from the network, the tutorials link to each other's rendered
pages, search answers in headless Chromium from ``file://``, and the API reference's long
signatures are formatted one parameter a line. The site is built once, as ``make docs``
builds it (tests/docs/test_docs_build.py), into a temporary folder.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.docs.test_docs_build import ROOT, build

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # MkDocs and Chromium, in processes of their own

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("docs") / "site"
    done = build(ROOT, folder)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


class _Links(HTMLParser):
    """A page's links and assets (``href``, ``src``) and the ids it holds."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []  # (tag, target)
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        for name in ("href", "src"):
            value = found.get(name)
            if value is not None and tag in ("a", "link", "script", "img", "iframe", "source"):
                self.links.append((tag, value))


def parsed(page: Path) -> _Links:
    reader = _Links()
    reader.feed(page.read_text())
    return reader


def test_every_link_and_asset_of_every_page_leads_to_a_file_of_the_site(site: Path) -> None:
    # but 404.html: a server's page (for a missing URL), its links from the site's root
    pages = {page: parsed(page) for page in sorted(site.rglob("*.html")) if page.name != "404.html"}
    assert len(pages) > 30
    broken, remote, raw = [], [], []
    for page, found in pages.items():
        for tag, link in found.links:
            parts = urlsplit(link)
            if parts.scheme in ("http", "https") or link.startswith("//"):
                if tag != "a":  # an asset from the network: not there for an offline reader
                    remote.append(f"{page.relative_to(site)}: <{tag}> {link}")
                continue
            if parts.scheme:  # mailto:, data:, javascript:
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target /= "index.html"
            if not target.is_file() or not target.is_relative_to(site):
                broken.append(f"{page.relative_to(site)}: {link}")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parsed(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
            if target.suffix == ".ipynb":
                raw.append(f"{page.relative_to(site)}: {link}")
    assert not broken, "\n".join(broken)
    assert not remote, "\n".join(remote)
    assert not raw, "\n".join(raw)  # a tutorial's "Next" opens the rendered page


def test_the_quickstarts_next_links_open_the_other_tutorials_rendered_pages(site: Path) -> None:
    # the links in its last cell's text, not the site's navigation beside it
    page = (site / "tutorials" / "quickstart.html").read_text()
    found = dict(re.findall(r'<a href="([^"]+)">(data_quality|backfill|identities)</a>', page))
    assert found == {
        "data_quality.html": "data_quality",
        "backfill.html": "backfill",
        "identities.html": "identities",
    }


def searched(site: Path, page: str, query: str, profile: Path) -> str:
    """The page opened from disk with ``?q=query`` (Material's search link), as Chromium
    has drawn it once its timers (the search's start and answer) have run."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            f"--user-data-dir={profile}",
            # the page's clock runs ahead when it is idle: no waiting on the wall clock
            "--virtual-time-budget=15000",
            "--dump-dom",
            f"{(site / page).as_uri()}?q={query}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


@pytest.mark.parametrize(
    ("page", "query", "answer"),
    [
        ("index.html", "ledger", "concepts/ledger.html"),
        ("reference/api/sending.html", "resend", "reference/api/sending.html"),
    ],
)
def test_search_answers_in_a_site_opened_from_disk(
    site: Path, page: str, query: str, answer: str, tmp_path: Path
) -> None:
    dom = searched(site, page, query, tmp_path / "profile")
    assert 'data-md-component="search-query"' in dom  # the header's search box
    said = re.search(r'md-search-result__meta">([^<]*)<', dom)
    assert said is not None
    found = re.fullmatch(r"([\d,]+) matching documents?", said.group(1))
    assert found is not None, said.group(1)  # not "Initializing search", not "No matching"
    assert int(found.group(1).replace(",", "")) > 0
    assert (site / answer).as_uri() in dom  # a result leads to the page that has it


def test_long_signatures_in_the_api_reference_are_one_parameter_a_line(site: Path) -> None:
    page = (site / "reference" / "api" / "sending.html").read_text()
    signatures = [
        re.sub(r"<[^>]+>", "", s)
        for s in re.findall(r'<div class="doc-signature highlight"><pre>(.*?)</pre>', page, re.S)
    ]
    assert len(signatures) > 10
    lines = [line for s in signatures for line in s.splitlines()]
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    send = next(s for s in signatures if s.startswith("send_events("))
    assert "\n    data: DataSource,\n    *,\n    dry_run: bool = False,\n" in send

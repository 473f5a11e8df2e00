"""No document points outside the repository: every cited source is in docs/references.md, every
relative link resolves, and nothing names the project's out-of-tree folders.

The catalog's and docs' citations read "references.md §x [D#]": the section must exist in
docs/references.md and the source key must be listed in its §8. Markdown links
(``[text](path)``) in README.md, docs/ and the data READMEs must name files of the repository.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REFERENCES = REPO / "docs" / "references.md"
OUTSIDE = re.compile(r"\.\./shared|shared/data/|shared/docs/|real-data\.md|product\.md")
CITATION = re.compile(r"references\.md §(\d+(?:\.\d+)?)")
SOURCE_KEY = re.compile(r"\[D(\d+)\]")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def tracked_text_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split("\n")
        files = [REPO / f for f in out if f]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file but caches
        files = [p for p in REPO.rglob("*") if p.is_file() and ".git" not in p.parts]
    return [p for p in files if p.suffix in (".py", ".md", ".yaml", ".yml", ".toml", ".cfg", ".txt") and p.is_file()]


def test_nothing_points_outside_the_repository() -> None:
    offenders = []
    for path in tracked_text_files():
        if path.resolve() == Path(__file__).resolve():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:120]}")
    assert not offenders, "\n".join(offenders)


def test_every_citation_names_a_section_and_source_of_references_md() -> None:
    text = REFERENCES.read_text(encoding="utf-8")
    sections = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", text, re.M))
    sources = set(re.findall(r"^- \[D(\d+)\]", text, re.M))
    assert {"1.1", "1.6", "3.2", "4.1", "5.1", "9"} <= sections and {"1", "2", "20"} <= sources
    cited_sections: set[str] = set()
    cited_sources: set[str] = set()
    for path in tracked_text_files():
        if path == REFERENCES:
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if "references.md" in line:
                cited_sections |= set(CITATION.findall(line))
                cited_sources |= set(SOURCE_KEY.findall(line))
    assert cited_sections, "no citation found: the pattern is wrong"
    assert cited_sections <= sections, f"cited sections missing from docs/references.md: {cited_sections - sections}"
    assert cited_sources <= sources, f"cited sources missing from docs/references.md §8: {cited_sources - sources}"


@pytest.mark.parametrize("doc", ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")),
                                 "data/pollux_t4/README.md", "scenarios/traces/README.md"])
def test_relative_links_resolve(doc: str) -> None:
    path = REPO / doc
    missing = [target for target in LINK.findall(path.read_text(encoding="utf-8"))
               if "://" not in target and not target.startswith("mailto:") and not (path.parent / target).exists()]
    assert not missing, f"{doc} links to files that do not exist: {missing}"

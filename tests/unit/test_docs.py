"""The documentation a user reads: every link of the README and the guides
goes somewhere, every guide is in the docsite's table of contents, and the
README stays a front door (the reference lives in the guides)."""

import re
from pathlib import Path

import pytest
import yaml

TOP = Path(__file__).resolve().parents[2]
GUIDES = TOP / "docs" / "docsite" / "rst"
MARKDOWN = [TOP / "README.md"] + sorted((TOP / "docs").glob("*.md"))
# [text](target) in Markdown; `text <target>`_ in RST (external or relative)
MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
RST_LINK = re.compile(r"`[^`<]*<([^>`]+)>`__?")


def local_targets(path, pattern):
    text = path.read_text(encoding="utf-8")
    for target in pattern.findall(text):
        if re.match(r"^[a-z]+://|^mailto:", target):
            continue
        yield target.split("#", 1)[0]


@pytest.mark.parametrize("path", MARKDOWN + sorted(GUIDES.glob("*.rst")), ids=lambda p: str(p.relative_to(TOP)))
def test_every_relative_link_names_a_file_of_the_repository(path):
    pattern = MD_LINK if path.suffix == ".md" else RST_LINK
    missing = [target for target in local_targets(path, pattern)
               if target and not (path.parent / target).exists()]
    assert missing == [], "%s links to files that do not exist: %s" % (path.relative_to(TOP), missing)


def test_the_readme_links_every_guide():
    readme = (TOP / "README.md").read_text(encoding="utf-8")
    linked = {Path(target).name for target in MD_LINK.findall(readme)}
    assert {guide.name for guide in GUIDES.glob("*.rst")} <= linked


def test_every_guide_is_in_the_docsites_table_of_contents_with_its_label():
    extra = yaml.safe_load((GUIDES.parent / "extra-docs.yml").read_text(encoding="utf-8"))
    listed = [entry for section in extra["sections"] for entry in section["toctree"]]
    assert sorted(listed) == sorted(guide.stem for guide in GUIDES.glob("*.rst"))
    for guide in GUIDES.glob("*.rst"):
        first = guide.read_text(encoding="utf-8").splitlines()[0]
        assert first == ".. _ansible_collections.fuzz.multinode.docsite.%s:" % guide.stem, guide.name


def test_the_readme_is_a_front_door_that_reads_in_minutes():
    lines = (TOP / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 320, "README.md has %d lines; the reference belongs in docs/docsite/rst/" % len(lines)
    text = "\n".join(lines)
    # the two commands, each setting itself up
    assert "scripts/run-example examples/generic-multinode-helper.yml" in text
    assert "\nscripts/test\n" in text

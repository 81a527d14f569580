"""The mapping table: every entry cited, the generated shim files and docs in sync with it."""

from pathlib import Path

from musacoder.port import mapping
from musacoder.port.shim import INCLUDE_DIR

ROOT = Path(__file__).resolve().parents[2]


def test_every_entry_cites_a_known_source_and_is_unique():
    seen = set()
    for e in mapping.ALL:
        assert e.source in mapping.SOURCES, e
        assert e.cuda and e.musa and e.cuda != e.musa, e
        assert (e.kind, e.cuda) not in seen, e
        seen.add((e.kind, e.cuda))


def test_shim_include_dir_matches_the_table():
    for rel, text in mapping.render_shim_files().items():
        path = INCLUDE_DIR / rel
        assert path.is_file(), f"{rel} missing: run musacoder.port.shim.write_include_dir()"
        assert path.read_text() == text, f"{rel} out of date: run musacoder.port.shim.write_include_dir()"


def test_shim_header_maps_every_musa_name_back():
    header = mapping.render_shim_header()
    for e in mapping.IDENTIFIERS:
        assert f"#define {e.musa} " in header, e
    assert "namespace c10 { namespace musa = ::c10::cuda; }" in header
    assert "#define is_privateuseone is_cuda" in header


def test_docs_render_the_table():
    doc = (ROOT / "docs" / "musa.md").read_text()
    assert mapping.render_markdown() in doc, "docs/musa.md out of date: re-render the table (docs/musa.md says how)"

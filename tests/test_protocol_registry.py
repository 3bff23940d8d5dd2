"""Codec registry: entry point group ``tablesense.protocols``, unknown names, plug-ins from other packages.

The plug-in test installs the example codec from docs/adding-a-codec.md as a real distribution (a
``.dist-info`` with ``entry_points.txt`` on ``sys.path``), so the documented route is what is tested.
"""

from __future__ import annotations

import importlib
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tablesense.daemon.rules.cards import Card
from tablesense.drivers.events import CardDrawn, CardUnreadable, Heartbeat, ShoeStatus, ShoeStatusKind
from tablesense.drivers.protocols import ENTRY_POINT_GROUP, Codec, UnknownProtocol, get_codec, protocol_names
from tablesense.drivers.protocols.tsref import TsrefCodec

DOC = Path(__file__).resolve().parent.parent / "docs" / "adding-a-codec.md"


def install_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dist: str, entry: str, module: str,
                   source: str) -> None:
    (tmp_path / f"{module}.py").write_text(source, encoding="utf-8")
    info = tmp_path / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()


def test_tsref_is_registered_through_the_installed_entry_point() -> None:
    eps = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert eps.get("tsref") == "tablesense.drivers.protocols.tsref:TsrefCodec"
    assert get_codec("tsref") is TsrefCodec
    assert "tsref" in protocol_names()
    assert isinstance(TsrefCodec("shoe"), Codec)


def test_unknown_protocol_is_one_line_listing_known_names() -> None:
    with pytest.raises(UnknownProtocol) as info:
        get_codec("angel-eye")
    msg = str(info.value)
    assert "\n" not in msg
    assert "'angel-eye'" in msg and "tsref" in msg
    assert isinstance(info.value, LookupError)


def test_the_documented_example_codec_plugs_in_from_another_package(tmp_path, monkeypatch) -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "docs/adding-a-codec.md has no python example"
    install_plugin(tmp_path, monkeypatch, "acme_tablesense", "acme = acme_codec_example:AcmeCodec",
                   "acme_codec_example", blocks[0])
    try:
        assert "acme" in protocol_names()
        cls = get_codec("acme")
        assert cls.name == "acme"
        codec = cls("table3-shoe")
        assert isinstance(codec, Codec)
        stream = b"N\nC:QH\nC:10D\nU\nH\nC:ZZ\n" + b"x" * 50
        events = [e for i in range(0, len(stream), 3) for e in codec.feed(stream[i:i + 3])]
        assert events == [ShoeStatus("table3-shoe", 0, ShoeStatusKind.NEW_SHOE),
                          CardDrawn("table3-shoe", 1, Card.parse("QH")),
                          CardDrawn("table3-shoe", 2, Card.parse("10D")),
                          CardUnreadable("table3-shoe", 3), Heartbeat("table3-shoe", 4)]
        assert codec.stats.malformed == 1 and codec.stats.too_long == 1
        assert codec.take_gaps() == []
    finally:
        sys.modules.pop("acme_codec_example", None)


def test_a_broken_plugin_is_one_clear_line(tmp_path, monkeypatch) -> None:
    install_plugin(tmp_path, monkeypatch, "broken_vendor", "broken = broken_vendor_codec:Missing",
                   "broken_vendor_codec", "X = 1\n")
    install_dir = tmp_path / "second"
    install_dir.mkdir()
    install_plugin(install_dir, monkeypatch, "notacodec_vendor", "notacodec = notacodec_mod:X",
                   "notacodec_mod", "X = 1\n")
    try:
        with pytest.raises(UnknownProtocol, match=r"'broken'.*cannot be loaded: AttributeError"):
            get_codec("broken")
        with pytest.raises(UnknownProtocol, match=r"'notacodec'.*not a codec class"):
            get_codec("notacodec")
        assert get_codec("tsref") is TsrefCodec  # a broken plug-in does not break the others
    finally:
        sys.modules.pop("broken_vendor_codec", None)
        sys.modules.pop("notacodec_mod", None)

"""Shared pieces of the signage browser tests: Debian's Chromium driven by Playwright, a publisher that
sends the daemon's messages (daemon/messages.py) the way the daemon does, and what the page measures
of itself (bounding boxes, font sizes, overflow) for the 5 m readability checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiomqtt
import msgspec

from tablesense.daemon.messages import Message, encode_message

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1920, "height": 1080}
TS = "2026-11-29T12:00:00Z"
WAIT_MS = 20_000  # how long Playwright waits for the page to show something (a wait, not a speed check)
NO_CHROMIUM = f"no Chromium binary at {CHROMIUM}: install Debian's 'chromium' package (.ci/run does)"

MIN_TEXT_PX = 28.0
MIN_CARD_PX = 140.0
MIN_ROAD_CELL_PX = 28.0


class TablePublisher:
    """Publishes to ``{prefix}/{table}/...`` like the daemon: JSON from msgspec Structs, QoS 1, retained
    state topics (status, round, devices, scoreboard, info), a table-wide seq and msg_id."""

    def __init__(self, client: aiomqtt.Client, prefix: str, table: str) -> None:
        self.client, self.prefix, self.table, self.seq = client, prefix, table, 0

    async def send(self, suffix: str, msg: Message, retain: bool = False) -> None:
        self.seq += 1
        msg = msgspec.structs.replace(msg, seq=self.seq, msg_id=f"{self.table}-{self.seq}")
        await self.client.publish(f"{self.prefix}/{self.table}/{suffix}", encode_message(msg), qos=1,
                                  retain=retain)

    async def raw(self, suffix: str, payload: bytes | dict[str, Any], retain: bool = False) -> None:
        data = payload if isinstance(payload, bytes) else msgspec.json.encode(payload)
        await self.client.publish(f"{self.prefix}/{self.table}/{suffix}", data, qos=1, retain=retain)


MEASURE_JS = """
() => {
  const shown = (e) => {
    const r = e.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) return false;
    for (let n = e; n && n.nodeType === 1; n = n.parentElement) {
      const cs = getComputedStyle(n);
      if (cs.display === 'none' || cs.visibility === 'hidden' || cs.opacity === '0') return false;
    }
    return true;
  };
  const within = (r, o) => r.left >= o.left - 0.5 && r.right <= o.right + 0.5 && r.top >= o.top - 0.5
                           && r.bottom <= o.bottom + 0.5;
  const rect = (e) => { const r = e.getBoundingClientRect();
                        return {x: r.left, y: r.top, r: r.right, b: r.bottom, w: r.width, h: r.height}; };
  const BOXES = '.card, .banner, .box-result, .pair, .hand, .wager, .stats, .outcome, .legend, .road, '
              + '.round, .wagers, .roads, .boxes, .top, .notice';
  const texts = [];
  for (const e of document.querySelectorAll('body *')) {
    const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !shown(e) || e.closest('[data-testid="operator"]')) continue;
    const cs = getComputedStyle(e);
    const outside = [];
    const r = e.getBoundingClientRect();
    for (let a = e.parentElement; a; a = a.parentElement) {
      if (!a.matches(BOXES)) continue;
      const ar = a.getBoundingClientRect();
      if (!within(r, ar)) outside.push(a.className.baseVal ?? a.className);
    }
    const block = e.clientWidth > 0 && !(e instanceof SVGElement);
    texts.push({text: e.textContent.trim().slice(0, 60), tag: e.tagName.toLowerCase(),
                testid: (e.closest('[data-testid]') || {dataset: {}}).dataset.testid || '',
                size: parseFloat(cs.fontSize), rect: rect(e), outside,
                clipped: block && (e.scrollWidth > e.clientWidth + 1
                                   || e.scrollHeight > e.clientHeight + 1)});
  }
  const cards = [...document.querySelectorAll('[data-testid="card"]')].filter(shown).map((c) => {
    const cr = c.getBoundingClientRect();
    const inside = [...c.children].every((s) => within(s.getBoundingClientRect(), cr));
    return {card: c.dataset.card, rect: rect(c), inside,
            clipped: c.scrollWidth > c.clientWidth + 1 || c.scrollHeight > c.clientHeight + 1};
  });
  const roads = [...document.querySelectorAll('.road svg')].filter(shown).map((s) => {
    const vb = s.viewBox.baseVal, size = parseFloat(s.dataset.cellSize), r = s.getBoundingClientRect();
    return {road: s.parentElement.dataset.testid, cell_w: r.width / (vb.width / size),
            cell_h: r.height / (vb.height / size), cells: s.querySelectorAll('[data-cell]').length,
            rect: rect(s)};
  });
  const panels = [...document.querySelectorAll('.top, .round, .boxes, .roads, .wagers')].filter(shown)
    .map((p) => ({panel: p.className, rect: rect(p)}));
  const el = document.scrollingElement;
  return {texts, cards, roads, panels, scroll: {w: el.scrollWidth, h: el.scrollHeight},
          viewport: {w: window.innerWidth, h: window.innerHeight}, lang: document.documentElement.lang};
}
"""


LAYOUT_JS = """
() => {
  const sel = ['.top', '.round', '.boxes', '.roads', '.wagers', '[data-testid="hand"]',
               '[data-testid="outcome"]', '[data-testid="banners"]', '[data-testid="box-result"]',
               '.road svg', '[data-testid="shoe-stats"]', '[data-testid="legend"]', '[data-testid="wager"]',
               '.cards > *'];
  const out = {};
  for (const s of sel) {
    document.querySelectorAll(s).forEach((e, i) => {
      const r = e.getBoundingClientRect();
      if (r.width > 0) out[`${s}#${i}`] = [Math.round(r.left * 2) / 2, Math.round(r.top * 2) / 2,
                                           Math.round(r.width * 2) / 2, Math.round(r.height * 2) / 2];
    });
  }
  return out;
}
"""


def overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    """Two rectangles share more than a hairline."""
    return min(a["r"], b["r"]) - max(a["x"], b["x"]) > 0.5 and min(a["b"], b["b"]) - max(a["y"], b["y"]) > 0.5


def readability_problems(m: dict[str, Any]) -> list[str]:
    """Everything on the measured page a player 5 m away could not read, or that does not fit: text below
    28 px, text outside its box or clipped, cards below 140 px or with an overflowing face, road cells
    below 28 px, overlapping panels, anything beyond the 1920x1080 screen. Empty: readable."""
    bad: list[str] = []
    vw, vh = m["viewport"]["w"], m["viewport"]["h"]
    if m["scroll"]["w"] > vw or m["scroll"]["h"] > vh:
        bad.append(f"page is {m['scroll']['w']}x{m['scroll']['h']}, larger than the {vw}x{vh} screen")
    for t in m["texts"]:
        r = t["rect"]
        if t["size"] < MIN_TEXT_PX:
            bad.append(f"text {t['text']!r} ({t['testid']}) is {t['size']} px")
        if t["outside"]:
            bad.append(f"text {t['text']!r} ({t['testid']}) overflows {t['outside']}")
        if t["clipped"]:
            bad.append(f"text {t['text']!r} ({t['testid']}) is clipped")
        if r["x"] < 0 or r["y"] < 0 or r["r"] > vw or r["b"] > vh:
            bad.append(f"text {t['text']!r} ({t['testid']}) is off the screen at {r}")
    for c in m["cards"]:
        if c["rect"]["h"] < MIN_CARD_PX:
            bad.append(f"card {c['card']} is {c['rect']['h']} px high")
        if not c["inside"] or c["clipped"]:
            bad.append(f"card {c['card']}: its rank or suit does not fit the face")
    for road in m["roads"]:
        if min(road["cell_w"], road["cell_h"]) < MIN_ROAD_CELL_PX:
            bad.append(f"road {road['road']} cells are {road['cell_w']:.1f}x{road['cell_h']:.1f} px")
    panels = m["panels"]
    for i, p in enumerate(panels):
        r = p["rect"]
        if r["x"] < 0 or r["y"] < 0 or r["r"] > vw or r["b"] > vh:
            bad.append(f"panel {p['panel']} is off the screen at {r}")
        for q in panels[i + 1:]:
            if overlaps(r, q["rect"]):
                bad.append(f"panels {p['panel']} and {q['panel']} overlap")
    return bad


def sizes(m: dict[str, Any]) -> dict[str, Any]:
    """The figures the report quotes: smallest text, smallest card, smallest road cell (px)."""
    return {"min_text_px": min(t["size"] for t in m["texts"]),
            "min_card_h_px": min((c["rect"]["h"] for c in m["cards"]), default=None),
            "min_card_w_px": min((c["rect"]["w"] for c in m["cards"]), default=None),
            "min_road_cell_px": min((min(r["cell_w"], r["cell_h"]) for r in m["roads"]), default=None),
            "road_cell_px": {r["road"]: round(min(r["cell_w"], r["cell_h"]), 1) for r in m["roads"]},
            "texts": len(m["texts"]), "cards": len(m["cards"])}

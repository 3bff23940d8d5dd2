// tablesense signage page: renders the display model pushed by the server (GET /events, server-sent
// events) in the display's language (static/i18n.js). Plain JavaScript, no third-party code. The model's
// shape is documented in docs/signage.md.
//
// URL parameters: ?lang=en|zh-Hans|zh-Hant (this display's language; default: the table's, from its
// info message), ?operator=1 (adds the technician's line: table and feed state, devices, topic prefix).
"use strict";

const COLOURS = { red: "#e11d2e", blue: "#1e5bff", green: "#19a64a", gold: "#ffcc33" };
const RESULT_COLOUR = { banker: "red", player: "blue", tie: "green" };
const SUITS = { S: "♠", H: "♥", D: "♦", C: "♣" };
const SVG_NS = "http://www.w3.org/2000/svg";
const BACCARAT = new Set(["baccarat", "ez-baccarat"]);
const BEAD_CELL = 50;      // px: bead plate and Big Road cells (>= 28 px, readable at 5 m)
const DERIVED_CELL = 36;   // px: Big Eye Boy, Small Road, Cockroach Pig cells
const BEAD_COLS = 7;
const ROAD_TEXT = 28;      // px: letters and tie counts inside road cells
const SLOTS = { player: 3, banker: 3, dealer: 2, board: 5 };
const WIN_CATEGORY = { player: "player_win", banker: "banker_win", tie: "tie", dragon_7: "dragon_7",
                       panda_8: "panda_8" };

const params = new URLSearchParams(window.location.search);
const urlLanguage = normaliseLanguage(params.get("lang"));
const operator = params.get("operator") === "1";

let feedOpen = false;
let haveState = false;
let last = null;
let lang = urlLanguage || "en";

function $(id) { return document.querySelector(`[data-testid="${id}"]`); }

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function svgEl(tag, attrs) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

function t(key, vars, fallback) { return tr(lang, key, vars, fallback); }

function cardParts(text) {
  const s = String(text).trim().toUpperCase();
  const suit = s.slice(-1);
  let rank = s.slice(0, -1);
  if (rank === "T") rank = "10";
  return { rank, suit, symbol: SUITS[suit] || suit, red: suit === "H" || suit === "D" };
}

function cardNode(text) {
  const c = cardParts(text);
  const node = el("div", { class: "card" + (c.red ? " red" : ""), "data-testid": "card", "data-card": text });
  node.append(el("span", { class: "rank" }, c.rank), el("span", { class: "suit" }, c.symbol));
  return node;
}

function cardRow(cards, slots) {
  const row = el("div", { class: "cards" });
  for (const c of cards) row.append(cardNode(c));
  for (let i = cards.length; i < slots; i++) row.append(el("div", { class: "slot", "aria-hidden": "true" }));
  return row;
}

function who(game, position) {
  if (["player", "banker", "dealer", "board"].includes(position)) return t("position." + position);
  return t(game === "uth" ? "seat" : "box", { n: position });
}

function roundName(m, shoe, round) {
  return m.numbering === "hand" ? t("hand", { n: shoe }) : t("round_n", { n: round });
}

// --- language, header, notices --------------------------------------------------------------------

function applyLanguage(m) {
  lang = urlLanguage || normaliseLanguage(m && m.language) || "en";
  document.documentElement.lang = lang;
  document.body.dataset.lang = lang;
  for (const node of document.querySelectorAll("[data-i18n]")) {
    node.textContent = t(node.dataset.i18n);
  }
}

function renderHeader(m) {
  $("table-id").textContent = m.table || "—";
  $("game").textContent = m.game ? t("game." + m.game, {}, m.game_label) : "—";
  let rn = "";
  if (m.shoe !== null && m.shoe !== undefined) {
    rn = m.numbering === "hand" ? t("hand", { n: m.shoe }) : t("shoe_round", { shoe: m.shoe, round: m.round ?? "—" });
  }
  $("round-no").textContent = rn;
  const phase = $("phase");
  phase.textContent = m.held ? t("on_hold") : (m.phase ? t("phase." + m.phase, {}, m.phase.replace(/_/g, " ")) : "");
  phase.className = "phase " + (m.held ? "held" : (m.phase || "none"));
  phase.dataset.phase = m.phase || "";
  phase.dataset.revealed = String(Boolean(m.revealed));
  document.body.className = "game-" + (m.game || "none") + (operator ? " operator-mode" : "");
}

function noticeKind(m) {
  if (!haveState) return "connecting";
  if (!feedOpen) return "feed";                     // the page lost the signage server
  if (m.broker === "disconnected") return "feed";   // the server lost the broker (after having it)
  if (m.broker !== "connected" || !m.received) return "connecting";
  if (m.table_status === "offline" || m.table_status === "refusing") return "table";
  return "";
}

function renderStatus(m) {
  const kind = noticeKind(m);
  const notice = $("offline-notice");
  notice.textContent = kind === "connecting" ? t("connecting") : kind === "feed" ? t("feed_offline")
    : kind === "table" ? t("table_closed") : "";
  notice.dataset.kind = kind;
  notice.classList.toggle("hidden", !kind);
  const footer = $("operator");
  footer.classList.toggle("hidden", !operator);
  if (!operator) return;
  const feedOk = feedOpen && m && m.broker === "connected";
  const ts = $("table-status");
  ts.textContent = "table " + (m ? m.table_status : "?") + (m && m.status_detail ? ` (${m.status_detail})` : "");
  ts.className = "pill " + (m && m.table_status === "online" ? "ok" : "bad");
  const fs = $("feed-status");
  fs.textContent = feedOk ? "feed live" : "feed " + (m ? m.broker : "connecting");
  fs.className = "pill " + (feedOk ? "ok" : "bad");
  $("devices").textContent = Object.entries((m && m.devices) || {}).map(([k, v]) => `${k}: ${v}`).join(" · ");
  $("source").textContent = m ? `${m.prefix}/${m.table} · rejected ${m.rejected}` : "";
}

// --- round: hands, outcome, banners ----------------------------------------------------------------

function renderHands(m) {
  const hands = $("hands");
  hands.replaceChildren();
  for (const h of m.hands || []) {
    const box = el("div", { class: "hand " + h.position + (h.won ? " won" : ""), "data-testid": "hand",
                            "data-position": h.position });
    const head = el("div", { class: "hand-head" });
    head.append(el("span", { class: "hand-name" }, who(m.game, h.position)));
    if (BACCARAT.has(m.game)) {
      head.append(el("span", { class: "total", "data-testid": h.position + "-total" },
        h.total === null || h.total === undefined ? "" : String(h.total)));
    }
    const slots = m.game === "blackjack" && h.position === "dealer" ? 1 : SLOTS[h.position] || 2;
    box.append(head, cardRow(h.cards || [], slots));
    hands.append(box);
  }
}

function outcomeText(m) {
  const o = m.outcome;
  if (!o) {
    const dealt = (m.cards || []).length > 0;
    if (m.game === "uth" && !dealt && ["dealing", "reveal", "playing"].includes(m.phase)) {
      return { tag: "", text: t("face_down"), cls: "muted" };
    }
    return { tag: "", text: "", cls: "" };
  }
  const tag = o.current ? "" : roundName(m, o.shoe, o.round);
  if (o.void) {
    const reason = o.void_reason ? " — " + t("void_reason." + o.void_reason, {}, o.void_reason) : "";
    return { tag, text: t("void") + reason, cls: "void" };
  }
  if (!o.winner) return { tag, text: "", cls: "" };
  let text = o.winner === "tie" ? t("tie_result", { p: o.player_total, b: o.banker_total })
    : t("wins", { who: who(m.game, o.winner),
                  hi: o.winner === "banker" ? o.banker_total : o.player_total,
                  lo: o.winner === "banker" ? o.player_total : o.banker_total });
  if (o.natural) text += " · " + t("natural");
  return { tag, text, cls: o.winner };
}

function renderRound(m) {
  renderHands(m);
  const outcome = $("outcome");
  const { tag, text, cls } = outcomeText(m);
  outcome.replaceChildren(el("div", { class: "outcome-round", "data-testid": "outcome-round" }, tag),
                          el("div", { class: "outcome-text " + cls, "data-testid": "outcome-text" }, text));
  outcome.className = "outcome " + cls;
  outcome.dataset.winner = m.outcome && !m.outcome.void ? (m.outcome.winner || "") : "";
  const banners = $("banners");
  banners.replaceChildren();
  if (!BACCARAT.has(m.game)) return;   // blackjack and UTH: the box tiles carry the pair results
  for (const b of m.banners || []) {
    const odds = b.odds ? " — " + oddsText(lang, b.odds) : "";
    banners.append(el("div", { class: "banner", "data-testid": "pair-banner", "data-category": b.category,
                               "data-position": b.position },
      `${who(m.game, b.position)} ${t("category." + b.category, {}, b.label)}${odds}`));
  }
}

// --- blackjack boxes / UTH seats with their pair results -------------------------------------------

function renderBoxes(m) {
  const grid = $("box-results");
  grid.replaceChildren();
  if (BACCARAT.has(m.game)) return;
  const byPos = new Map((m.boxes || []).map((b) => [String(b.position), b]));
  const positions = [...new Set([...(m.seats || []), ...byPos.keys()])]
    .sort((a, b) => (parseInt(a, 10) || 0) - (parseInt(b, 10) || 0));
  grid.style.gridTemplateColumns = `repeat(${Math.max(positions.length, 1)}, minmax(0, 1fr))`;
  for (const pos of positions) {
    const box = byPos.get(pos) || { position: pos, cards: [], pair: null, hit: false, outcome: null, odds: null };
    const tile = el("div", { class: "box-result" + (box.hit ? " hit" : "") + (box.cards.length ? "" : " empty"),
                             "data-testid": "box-result", "data-position": pos });
    tile.append(el("div", { class: "who" }, who(m.game, pos)), cardRow(box.cards, 2));
    const pair = el("div", { class: "pair" + (box.hit ? " hit" : ""), "data-testid": "box-pair",
                             "data-category": box.pair || "" });
    if (box.hit) {
      pair.append(el("span", { class: "grade" }, t("category." + box.pair, {}, box.label)));
      if (box.odds) pair.append(" ", el("span", { class: "odds" }, oddsText(lang, box.odds)));
    } else if (box.pair) {
      pair.textContent = box.outcome === "push" || box.outcome === "void" ? t("returned")
        : t(m.game === "uth" ? "no_win" : "no_pair");   // not every Ultimate Pairs line is a pair
    }
    tile.append(pair);
    grid.append(tile);
  }
}

// --- wagers: limits, odds lines, commission --------------------------------------------------------

function renderWagers(m) {
  const list = $("wager-list");
  list.replaceChildren();
  const wagers = [...(m.main_wagers || []), ...(m.wagers || [])];
  $("wager-head").classList.toggle("hidden", !wagers.length);
  if (!wagers.length) {
    list.append(el("p", { class: "muted" }, t("waiting")));
    return;
  }
  for (const w of wagers) {
    const box = el("div", { class: "wager", "data-testid": "wager", "data-bet": w.bet });
    const head = el("div", { class: "wager-row wager-title" });
    head.append(el("span", { class: "wager-name" }, t("bet." + w.bet, {}, w.label)));
    let lines = w.paytable || [];
    if (lines.length && lines[0].category === WIN_CATEGORY[w.bet]) {   // Player 1 to 1, Tie 8 to 1 ...
      head.append(el("span", { class: "odds", "data-testid": "odds-line", "data-category": lines[0].category },
        oddsText(lang, lines[0].odds)));
      lines = lines.slice(1);
    }
    head.append(el("span", { class: "spacer" }));
    if (w.limits) head.append(el("span", { class: "limits", "data-testid": "wager-limits" }, w.limits));
    box.append(head);
    const body = el("div", { class: "lines" + (lines.length > 5 ? " many" : "") });
    for (const line of lines) {
      const row = el("div", { class: "wager-row line", "data-testid": "odds-line", "data-category": line.category });
      row.append(el("span", { class: "label" }, t("category." + line.category, {}, line.label)),
                 el("span", { class: "odds" }, oddsText(lang, line.odds)));
      body.append(row);
    }
    if (w.bet === "banker" && m.commission) {
      const c = m.commission;
      const rule = el("div", { class: "commission", "data-testid": "commission" });
      rule.append(el("div", {}, t("commission", { rate: c.rate })));
      if (c.rounding && c.unit_text) rule.append(el("div", {}, t("rounding." + c.rounding, { unit: c.unit_text })));
      body.append(rule);
    }
    if (body.childElementCount) box.append(body);
    list.append(box);
  }
}

// --- roads (SVG) --------------------------------------------------------------------------------------

function roadSvg(cells, opts) {
  const size = opts.size, rows = opts.rows || 6, visible = Math.max(1, opts.cols);
  const maxCol = cells.reduce((mx, c) => Math.max(mx, c.col), -1);
  const offset = Math.max(0, maxCol + 1 - visible);
  const svg = svgEl("svg", { width: visible * size, height: rows * size,
                             viewBox: `0 0 ${visible * size} ${rows * size}`, role: "img" });
  for (let i = 0; i <= visible; i++) {
    svg.append(svgEl("line", { x1: i * size, y1: 0, x2: i * size, y2: rows * size, stroke: "#c9d3cd", "stroke-width": 1 }));
  }
  for (let j = 0; j <= rows; j++) {
    svg.append(svgEl("line", { x1: 0, y1: j * size, x2: visible * size, y2: j * size, stroke: "#c9d3cd", "stroke-width": 1 }));
  }
  for (const c of cells) {
    if (c.col < offset) continue;
    const g = svgEl("g", { "data-cell": "", "data-col": c.col, "data-row": c.row });
    opts.draw(g, c, (c.col - offset) * size, c.row * size, size);
    svg.append(g);
  }
  svg.dataset.cells = String(cells.length);
  svg.dataset.cellSize = String(size);
  return svg;
}

function marker(g, cx, cy, r, colour, mark) {
  g.append(svgEl("circle", { cx, cy, r, fill: COLOURS[colour], stroke: "#fff", "stroke-width": 2, "data-mark": mark }));
}

function pairDots(g, c, x, y, s) {
  const r = s * 0.14;
  if (c.banker_pair) marker(g, x + r + 1, y + r + 1, r, "red", "banker-pair");
  if (c.player_pair) marker(g, x + s - r - 1, y + s - r - 1, r, "blue", "player-pair");
}

function cellText(x, y, s, text, colour) {
  const node = svgEl("text", { x: x + s / 2, y: y + s / 2, "text-anchor": "middle", "dominant-baseline": "central",
                               "font-size": ROAD_TEXT, "font-weight": 700, fill: colour });
  node.textContent = text;
  return node;
}

function drawBead(g, c, x, y, s) {
  const colour = RESULT_COLOUR[c.result];
  g.dataset.colour = colour;
  g.dataset.result = c.result;
  g.append(svgEl("circle", { cx: x + s / 2, cy: y + s / 2, r: s * 0.46, fill: COLOURS[colour] }));
  g.append(cellText(x, y, s, t("bead." + c.result), "#fff"));
  if (c.natural) marker(g, x + s - s * 0.14 - 1, y + s * 0.14 + 1, s * 0.14, "gold", "natural");
  pairDots(g, c, x, y, s);
}

function drawBig(g, c, x, y, s) {
  const colour = RESULT_COLOUR[c.winner];
  g.dataset.colour = colour;
  g.dataset.result = c.winner;
  g.dataset.ties = String(c.ties || 0);
  g.append(svgEl("circle", { cx: x + s / 2, cy: y + s / 2, r: s * 0.36, fill: "none", stroke: COLOURS[colour],
                             "stroke-width": s * 0.12 }));
  if (c.ties > 0) {
    g.append(svgEl("line", { x1: x + s * 0.2, y1: y + s * 0.8, x2: x + s * 0.8, y2: y + s * 0.2, stroke: COLOURS.green,
                             "stroke-width": s * 0.1, "data-mark": "tie" }));
    if (c.ties > 1) g.append(cellText(x, y, s, String(c.ties), "#0b5d2a"));
  }
  if (c.natural) marker(g, x + s - s * 0.14 - 1, y + s * 0.14 + 1, s * 0.14, "gold", "natural");
  pairDots(g, c, x, y, s);
}

function drawDerived(kind) {
  return (g, c, x, y, s) => {
    g.dataset.colour = c.colour;
    const col = COLOURS[c.colour];
    if (kind === "big_eye_boy") {
      g.append(svgEl("circle", { cx: x + s / 2, cy: y + s / 2, r: s * 0.34, fill: "none", stroke: col, "stroke-width": s * 0.14 }));
    } else if (kind === "small_road") {
      g.append(svgEl("circle", { cx: x + s / 2, cy: y + s / 2, r: s * 0.38, fill: col }));
    } else {
      g.append(svgEl("line", { x1: x + s * 0.2, y1: y + s * 0.8, x2: x + s * 0.8, y2: y + s * 0.2, stroke: col, "stroke-width": s * 0.16 }));
    }
  };
}

function contentWidth(node) {
  const cs = getComputedStyle(node);
  return node.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
}

function renderStats(m, sb) {
  const st = sb.stats || {};
  const stats = $("shoe-stats");
  stats.replaceChildren();
  const lines = [["banker", st.banker, "b"], ["player", st.player, "p"], ["tie", st.tie, "t"],
                 ["player_pair", st.player_pair, ""], ["banker_pair", st.banker_pair, ""], ["naturals", st.naturals, ""],
                 ["rounds", st.rounds, ""], ["cards_remaining", st.cards_remaining ?? m.cards_remaining ?? "—", ""]];
  for (const [key, value, cls] of lines) {
    stats.append(el("span", { class: "stat-name" }, t("stat." + key)));
    stats.append(el("span", { class: "stat-value " + cls, "data-stat": key }, String(value ?? 0)));
  }
}

function renderLegend() {
  const legend = $("legend");
  legend.replaceChildren();
  for (const [key, colour] of [["banker_pair", "red"], ["player_pair", "blue"], ["natural", "gold"]]) {
    const item = el("span", { class: "legend-item", "data-legend": key });
    const svg = svgEl("svg", { width: 28, height: 28, viewBox: "0 0 28 28", "aria-hidden": "true" });
    svg.append(svgEl("circle", { cx: 14, cy: 14, r: 11, fill: COLOURS[colour], stroke: "#fff", "stroke-width": 2 }));
    item.append(svg, el("span", {}, t("legend." + key)));
    legend.append(item);
  }
}

function renderRoads(m) {
  if (!BACCARAT.has(m.game)) return;
  const sb = m.scoreboard || { bead_plate: [], big_road: [], big_eye_boy: [], small_road: [], cockroach_pig: [],
                               stats: {}, leading_ties: 0 };
  const rows = sb.rows || 6;
  renderStats(m, sb);
  renderLegend();
  const section = $("roads");
  const width = contentWidth(section);
  const gap = parseFloat(getComputedStyle(section.querySelector(".road-row")).columnGap) || 16;
  const statsWidth = $("shoe-stats").getBoundingClientRect().width;
  const bigCols = Math.floor((width - BEAD_COLS * BEAD_CELL - statsWidth - 2 * gap) / BEAD_CELL);
  const derivedCols = Math.floor((width - 2 * gap) / 3 / DERIVED_CELL);
  $("bead-plate").replaceChildren(roadSvg(sb.bead_plate || [], { size: BEAD_CELL, cols: BEAD_COLS, rows, draw: drawBead }));
  $("big-road").replaceChildren(roadSvg(sb.big_road || [], { size: BEAD_CELL, cols: bigCols, rows, draw: drawBig }));
  for (const [key, id] of [["big_eye_boy", "big-eye-boy"], ["small_road", "small-road"], ["cockroach_pig", "cockroach-pig"]]) {
    $(id).replaceChildren(roadSvg(sb[key] || [], { size: DERIVED_CELL, cols: derivedCols, rows, draw: drawDerived(key) }));
  }
}

function render(m) {
  last = m;
  haveState = true;
  applyLanguage(m);
  renderHeader(m);
  renderStatus(m);
  renderRound(m);
  renderBoxes(m);
  renderWagers(m);
  renderRoads(m);
  document.body.dataset.version = String(m.version);
}

function connect() {
  const es = new EventSource("/events");
  es.addEventListener("open", () => { feedOpen = true; renderStatus(last); });
  es.addEventListener("state", (ev) => {
    feedOpen = true;
    try { render(JSON.parse(ev.data)); } catch (err) { console.error("bad state event", err); }
  });
  es.addEventListener("error", () => {
    // EventSource reconnects on its own (the server sends "retry: 1000").
    feedOpen = false;
    renderStatus(last);
  });
}

window.addEventListener("resize", () => { if (last) render(last); });
applyLanguage(null);
document.body.className = "game-none" + (operator ? " operator-mode" : "");
renderStatus(null);
connect();

// tablesense signage page: renders the display model pushed by the server (GET /events, server-sent
// events). Plain JavaScript, no third-party code. The model's shape is documented in docs/signage.md.
"use strict";

const COLOURS = { red: "#e11d2e", blue: "#1e5bff", green: "#19a64a" };
const RESULT_COLOUR = { banker: "red", player: "blue", tie: "green" };
const SUITS = { S: "♠", H: "♥", D: "♦", C: "♣" };
const SVG_NS = "http://www.w3.org/2000/svg";

let feedOpen = false;
let last = null;

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

function cardParts(text) {
  const s = String(text).trim().toUpperCase();
  const suit = s.slice(-1);
  let rank = s.slice(0, -1);
  if (rank === "T") rank = "10";
  return { rank, suit, symbol: SUITS[suit] || suit, red: suit === "H" || suit === "D" };
}

function cardNode(text) {
  const c = cardParts(text);
  return el("span", { class: "card" + (c.red ? " red" : ""), "data-testid": "card", "data-card": text },
    c.rank + c.symbol);
}

function baccaratValue(text) {
  const r = cardParts(text).rank;
  if (r === "A") return 1;
  const n = parseInt(r, 10);
  return Number.isNaN(n) || n >= 10 ? 0 : n;
}

function positionLabel(game, pos) {
  if (pos === "player" || pos === "banker" || pos === "dealer" || pos === "board") {
    return pos.charAt(0).toUpperCase() + pos.slice(1);
  }
  return (game === "uth" ? "Seat " : "Box ") + pos;
}

function positionOrder(pos) {
  const fixed = { player: 0, banker: 1, dealer: 2, board: 3 };
  if (pos in fixed) return [fixed[pos], 0];
  const n = parseInt(pos, 10);
  return [4, Number.isNaN(n) ? 999 : n];
}

// --- header, notices -------------------------------------------------------------------------------

function renderHeader(m) {
  $("table-id").textContent = m.table || "—";
  $("game").textContent = m.game_label || "—";
  const rn = [];
  if (m.shoe !== null && m.shoe !== undefined) rn.push("Shoe " + m.shoe);
  if (m.round !== null && m.round !== undefined) rn.push("Round " + m.round);
  $("round-no").textContent = rn.join(" · ");
  const phase = $("phase");
  phase.textContent = m.held ? "on hold" : (m.phase || "waiting").replace(/_/g, " ");
  phase.className = "phase " + (m.phase || "");
  document.body.className = "game-" + (m.game || "none");
}

function renderStatus(m) {
  const feedOk = feedOpen && m && m.broker === "connected";
  const tableState = m ? m.table_status : "unknown";
  const ts = $("table-status");
  ts.textContent = "table " + tableState;
  ts.className = "pill " + (tableState === "online" ? "ok" : tableState === "offline" ? "bad" : "");
  const fs = $("feed-status");
  fs.textContent = feedOk ? "feed live" : "feed offline";
  fs.className = "pill " + (feedOk ? "ok" : "bad");
  const notice = $("offline-notice");
  let text = "";
  let kind = "";
  if (!feedOk) { text = "Feed offline — reconnecting…"; kind = "feed"; }
  else if (tableState === "offline") { text = "Table offline"; kind = "table"; }
  notice.textContent = text;
  notice.dataset.kind = kind;
  notice.classList.toggle("hidden", !text);
}

// --- round: cards, outcome, banners -----------------------------------------------------------------

function renderRound(m) {
  const hands = $("hands");
  hands.replaceChildren();
  const game = m.game || "";
  const baccarat = game === "baccarat" || game === "ez-baccarat";
  const groups = new Map();
  if (baccarat) { groups.set("player", []); groups.set("banker", []); }
  const cards = (m.cards || []).slice().sort((a, b) => a.index - b.index);
  for (const c of cards) {
    if (!groups.has(c.position)) groups.set(c.position, []);
    groups.get(c.position).push(c.card);
  }
  const res = m.results || {};
  const bac = res.baccarat || null;
  if (!cards.length && bac) {
    groups.set("player", (bac.player || []).slice());
    groups.set("banker", (bac.banker || []).slice());
  }
  if (!cards.length && res.boxes) {
    for (const box of res.boxes) groups.set(box.position, box.cards.slice());
    if (res.dealer && res.dealer.length) groups.set("dealer", res.dealer.slice());
    if (res.board && res.board.length) groups.set("board", res.board.slice());
  }
  const keys = [...groups.keys()].sort((a, b) => {
    const [x1, x2] = positionOrder(a); const [y1, y2] = positionOrder(b);
    return x1 - y1 || x2 - y2;
  });
  for (const pos of keys) {
    const list = groups.get(pos);
    const box = el("div", { class: "hand " + pos, "data-testid": "hand", "data-position": pos });
    const h = el("h3");
    h.append(el("span", {}, positionLabel(game, pos)));
    if (baccarat) {
      let total = list.reduce((s, c) => s + baccaratValue(c), 0) % 10;
      if (bac && (pos === "player" || pos === "banker")) total = bac[pos + "_total"];
      if (list.length) h.append(el("span", { class: "total", "data-testid": pos + "-total" }, String(total)));
      if (bac && bac.winner === pos) box.classList.add("won");
    }
    box.append(h);
    const row = el("div", { class: "cards" });
    for (const c of list) row.append(cardNode(c));
    box.append(row);
    hands.append(box);
  }
  const outcome = $("outcome");
  outcome.className = "outcome";
  outcome.textContent = "";
  const before = m.last_round !== null && m.last_round !== undefined ? `Round ${m.last_round}: ` : "";
  if (m.void || res.void) {
    outcome.textContent = before + "Round void";
  } else if (bac) {
    outcome.classList.add(bac.winner);
    outcome.textContent = before + (bac.winner === "tie" ? `Tie ${bac.player_total} – ${bac.banker_total}`
      : `${bac.winner === "banker" ? "Banker" : "Player"} wins ${bac[bac.winner + "_total"]} – ` +
        `${bac[(bac.winner === "banker" ? "player" : "banker") + "_total"]}`);
  }
  outcome.dataset.winner = bac && !res.void ? bac.winner : "";

  const banners = $("banners");
  banners.replaceChildren();
  for (const b of m.banners || []) {
    banners.append(el("div", { class: "banner", "data-testid": "pair-banner", "data-category": b.category },
      b.text));
  }
}

// --- side wagers ------------------------------------------------------------------------------------

function renderWagers(m) {
  const list = $("wager-list");
  list.replaceChildren();
  if (!m.wagers || !m.wagers.length) {
    list.append(el("p", { class: "muted" }, "No side wager information yet"));
    return;
  }
  for (const w of m.wagers) {
    const box = el("div", { class: "wager", "data-testid": "wager", "data-bet": w.bet });
    box.append(el("div", { class: "wager-name" }, w.label));
    if (w.limits) box.append(el("div", { class: "limits", "data-testid": "wager-limits" }, "Limits " + w.limits));
    const t = el("table");
    for (const line of w.paytable || []) {
      const tr = el("tr");
      tr.append(el("td", {}, line.label), el("td", { class: "odds" }, line.odds));
      t.append(tr);
    }
    box.append(t);
    list.append(box);
  }
}

// --- roads (SVG) --------------------------------------------------------------------------------------

function roadSvg(cells, opts) {
  const size = opts.size, rows = opts.rows || 6, visible = opts.cols;
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
  return svg;
}

function pairDots(g, c, x, y, s) {
  const r = Math.max(3, s * 0.13);
  if (c.banker_pair) {
    g.append(svgEl("circle", { cx: x + r + 1, cy: y + r + 1, r, fill: COLOURS.red, stroke: "#fff", "data-mark": "banker-pair" }));
  }
  if (c.player_pair) {
    g.append(svgEl("circle", { cx: x + s - r - 1, cy: y + s - r - 1, r, fill: COLOURS.blue, stroke: "#fff", "data-mark": "player-pair" }));
  }
}

function drawBead(g, c, x, y, s) {
  const colour = RESULT_COLOUR[c.result];
  g.dataset.colour = colour;
  g.dataset.result = c.result;
  g.append(svgEl("circle", { cx: x + s / 2, cy: y + s / 2, r: s * 0.42, fill: COLOURS[colour] }));
  const t = svgEl("text", { x: x + s / 2, y: y + s / 2 + s * 0.16, "text-anchor": "middle",
                            "font-size": s * 0.45, "font-weight": 700, fill: "#fff" });
  t.textContent = c.result === "banker" ? "B" : c.result === "player" ? "P" : "T";
  g.append(t);
  if (c.natural) {
    g.append(svgEl("circle", { cx: x + s - s * 0.14, cy: y + s * 0.14, r: s * 0.11, fill: "#ffcc33", stroke: "#333", "data-mark": "natural" }));
  }
  pairDots(g, c, x, y, s);
}

function drawBig(g, c, x, y, s) {
  const colour = RESULT_COLOUR[c.winner];
  g.dataset.colour = colour;
  g.dataset.result = c.winner;
  g.dataset.ties = String(c.ties || 0);
  g.append(svgEl("circle", { cx: x + s / 2, cy: y + s / 2, r: s * 0.36, fill: "none", stroke: COLOURS[colour], "stroke-width": s * 0.12 }));
  if (c.ties > 0) {
    g.append(svgEl("line", { x1: x + s * 0.2, y1: y + s * 0.8, x2: x + s * 0.8, y2: y + s * 0.2, stroke: COLOURS.green,
                             "stroke-width": s * 0.1, "data-mark": "tie" }));
    if (c.ties > 1) {
      const t = svgEl("text", { x: x + s / 2, y: y + s / 2 + s * 0.14, "text-anchor": "middle", "font-size": s * 0.4,
                                "font-weight": 800, fill: "#0b5d2a" });
      t.textContent = String(c.ties);
      g.append(t);
    }
  }
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

function renderRoads(m) {
  const sb = m.scoreboard || { bead_plate: [], big_road: [], big_eye_boy: [], small_road: [], cockroach_pig: [],
                               stats: {}, leading_ties: 0 };
  const rows = sb.rows || 6;
  $("bead-plate").replaceChildren(roadSvg(sb.bead_plate || [], { size: 46, cols: 8, rows, draw: drawBead }));
  $("big-road").replaceChildren(roadSvg(sb.big_road || [], { size: 46, cols: 16, rows, draw: drawBig }));
  for (const [key, id] of [["big_eye_boy", "big-eye-boy"], ["small_road", "small-road"], ["cockroach_pig", "cockroach-pig"]]) {
    $(id).replaceChildren(roadSvg(sb[key] || [], { size: 24, cols: 18, rows, draw: drawDerived(key) }));
  }
  const st = sb.stats || {};
  const stats = $("shoe-stats");
  stats.replaceChildren();
  const lines = [["Banker", st.banker, "b", "banker"], ["Player", st.player, "p", "player"], ["Tie", st.tie, "t", "tie"],
                 ["Player pair", st.player_pair, "", "player_pair"], ["Banker pair", st.banker_pair, "", "banker_pair"],
                 ["Naturals", st.naturals, "", "naturals"], ["Rounds", st.rounds, "", "rounds"],
                 ["Cards left", st.cards_remaining ?? m.cards_remaining ?? "—", "", "cards_remaining"]];
  for (const [label, value, cls, key] of lines) {
    stats.append(el("span", {}, label));
    stats.append(el("span", { class: cls, "data-stat": key }, String(value ?? 0)));
  }
}

// --- blackjack / UTH pair results ---------------------------------------------------------------------

function renderBoxes(m) {
  const grid = $("box-results");
  grid.replaceChildren();
  const res = m.results || {};
  for (const box of res.boxes || []) {
    const tile = el("div", { class: "box-result", "data-testid": "box-result", "data-position": box.position });
    tile.append(el("div", { class: "who" }, positionLabel(m.game, box.position)));
    const pair = box.pair && !["no_pair", "lose", "none", "void"].includes(box.pair) &&
      !box.pair.startsWith("ineligible");
    const label = pair ? box.pair.split("_").map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join(" ") : "No pair";
    const banner = (m.banners || []).find((b) => b.who === positionLabel(m.game, box.position) && b.category === box.pair);
    tile.append(el("div", { class: "pair" + (pair ? " hit" : ""), "data-testid": "box-pair" },
      pair && banner && banner.odds ? `${label} — ${banner.odds}` : label));
    grid.append(tile);
  }
  if (!(res.boxes || []).length) grid.append(el("p", { class: "muted" }, "After settlement"));
}

function renderFooter(m) {
  const dev = Object.entries(m.devices || {}).map(([k, v]) => `${k}: ${v}`).join(" · ");
  $("devices").textContent = dev;
  $("source").textContent = `${m.prefix}/${m.table}`;
}

function render(m) {
  last = m;
  renderHeader(m);
  renderStatus(m);
  renderRound(m);
  renderWagers(m);
  renderRoads(m);
  renderBoxes(m);
  renderFooter(m);
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

renderStatus(null);
connect();

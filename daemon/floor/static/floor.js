// tablesense floor page: renders the model pushed by the server (GET /events, server-sent events).
// Plain JavaScript, no third-party code; the model's shape is documented in docs/floor.md.
"use strict";

function $(id) { return document.querySelector(`[data-testid="${id}"]`); }

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function cell(row, text, cls) {
  const td = el("td", cls ? { class: cls } : {}, text === null || text === undefined ? "—" : String(text));
  row.appendChild(td);
  return td;
}

function render(model) {
  $("gaming-day").textContent = `gaming day ${model.gaming_day} (from ${String(model.start_hour).padStart(2, "0")}:00 ${model.zone})`;
  const body = $("table-rows");
  body.replaceChildren();
  let online = 0, held = 0, alarms = 0;
  for (const t of model.tables) {
    const row = el("tr", { "data-testid": "table-row", "data-table": t.table, class: t.held ? "held" : "" });
    cell(row, t.table).setAttribute("data-testid", "table-id");
    const st = cell(row, "");
    st.appendChild(el("span", { class: `state ${t.state}`, "data-testid": "table-state", title: t.detail || "" }, t.state));
    cell(row, t.game);
    cell(row, t.shoe).setAttribute("data-testid", "shoe");
    const rnd = cell(row, t.round === null ? null : `${t.round}${t.phase ? " · " + t.phase : ""}`);
    rnd.setAttribute("data-testid", "round");
    const al = cell(row, "");
    al.setAttribute("data-testid", "alarms");
    for (const a of t.alarms) {
      const line = el("span", { class: `alarm ${a.severity}${a.held ? " held" : ""}${a.source === "floor" ? " floor" : ""}`,
                                 "data-testid": "alarm", "data-code": a.code, title: a.text });
      line.appendChild(el("span", { class: "code" }, a.code));
      line.appendChild(document.createTextNode(a.text.length > 80 ? a.text.slice(0, 79) + "…" : a.text));
      al.appendChild(line);
    }
    if (!t.alarms.length) al.textContent = "—";
    const d = t.today || {};
    cell(row, d.rounds, "num");
    cell(row, d.handle, "num").setAttribute("data-testid", "handle");
    const win = cell(row, d.house_win, "num" + (d.house_win && d.house_win.startsWith("-") ? " neg" : ""));
    win.setAttribute("data-testid", "win");
    cell(row, d.hold_pct, "num").setAttribute("data-testid", "hold");
    cell(row, d.theo_hold_pct, "num").setAttribute("data-testid", "theo");
    body.appendChild(row);
    if (t.state === "online") online += 1;
    if (t.held) held += 1;
    alarms += t.alarms.length;
  }
  if (!model.tables.length) {
    const row = el("tr");
    const td = cell(row, "No table has reported yet.", "muted");
    td.setAttribute("colspan", "11");
    body.appendChild(row);
  }
  $("summary").textContent = `${model.tables.length} tables · ${online} online · ${held} held · ${alarms} open alarms`;
  $("updated").textContent = `updated ${model.updated_at}`;
}

function connect() {
  const feed = $("feed-status");
  const es = new EventSource("/events");
  es.addEventListener("open", () => { feed.textContent = "feed live"; feed.className = "pill ok"; });
  es.addEventListener("error", () => { feed.textContent = "feed offline"; feed.className = "pill bad"; });
  es.addEventListener("state", (ev) => { render(JSON.parse(ev.data)); });
}

connect();

"use strict";
// The admin page of fairsched: it polls state.json and draws it, with the
// DOM only (textContent, never HTML from data), and sends each control as
// a POST of a form to the handler.

let page = 0, controls = false;
// issued numbers the requests of state.json; shown is the number of the
// one drawn last: a response older than it (a poll that was overtaken by
// the refresh after a change) is dropped, not drawn over a newer one.
let issued = 0, shown = 0;
// refreshEvery is the pause between one poll's answer and the next poll:
// the next is set only once the last has answered, so a slow server is
// never sent a pile of requests.
const refreshEvery = 2000;
const svgNS = "http://www.w3.org/2000/svg";

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function button(td, label, path, fields) {
  if (!controls) return;
  const b = document.createElement("button");
  b.textContent = label;
  b.dataset.action = path;
  b.onclick = () => change(path, fields());
  td.appendChild(b);
}

function controlCell(row) {
  const td = row.insertCell();
  td.className = "control";
  return td;
}

async function change(path, fields) {
  const resp = await fetch(path, {method: "POST", body: new URLSearchParams(fields)});
  document.getElementById("error").textContent = resp.ok ? "" : await resp.text();
  refresh();
  return resp.ok;
}

function fill(id, rows, each) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  for (const r of rows || []) each(body.insertRow(), r);
}

function seconds(ns) { return (ns / 1e9).toFixed(1) + " s"; }

function state(j) {
  if (j.Running) return "running";
  let s = j.Waiting;
  if (j.WaitingOn) s += " (job " + j.WaitingOn + ")";
  if (j.WaitingFor) s += " (" + j.WaitingFor + ")";
  return s;
}

function tierName(st, t) { return (st.TierNames && st.TierNames[t]) || String(t); }

function svg(name, attrs) {
  const e = document.createElementNS(svgNS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

function format(v, unit) {
  if (unit === "s") return v < 1 ? (v * 1000).toFixed(0) + " ms" : v.toFixed(1) + " s";
  if (unit === "/s") return (v < 10 ? v.toFixed(1) : v.toFixed(0)) + "/s";
  return String(Math.round(v));
}

// chart draws one chart of the history as an inline SVG: a line per
// series over the sample times, scaled to the largest value.
function chart(c, times) {
  const W = 360, H = 150, left = 40, right = 8, top = 8, bottom = 18;
  const div = document.createElement("div");
  div.className = "chart";
  div.dataset.chart = c.Title;
  const h = document.createElement("h3");
  h.textContent = c.Title;
  div.appendChild(h);
  const s = svg("svg", {viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": c.Title});
  let top_ = 0;
  for (const l of c.Lines) for (const v of l.Values) top_ = Math.max(top_, v);
  const ymax = top_ > 0 ? top_ * 1.1 : 1;
  const n = times.length;
  const x = i => left + (n > 1 ? i * (W - left - right) / (n - 1) : 0);
  const y = v => top + (H - top - bottom) * (1 - v / ymax);
  s.appendChild(svg("line", {x1: left, y1: y(0), x2: W - right, y2: y(0), class: "axis"}));
  s.appendChild(svg("line", {x1: left, y1: top, x2: left, y2: y(0), class: "axis"}));
  const label = (text, lx, ly, anchor) => {
    const t = svg("text", {x: lx, y: ly, class: "label", "text-anchor": anchor});
    t.textContent = text;
    s.appendChild(t);
  };
  label(format(top_, c.Unit), left - 3, top + 8, "end");
  label("0", left - 3, y(0), "end");
  if (n > 1) {
    const span = (new Date(times[n - 1]) - new Date(times[0])) / 1000;
    label(`−${Math.round(span)} s`, left, H - 4, "start");
    label("now", W - right, H - 4, "end");
  }
  const legend = document.createElement("div");
  legend.className = "legend";
  c.Lines.forEach((l, k) => {
    const cls = "c" + (k % 10);
    if (n > 0) {
      const pts = l.Values.map((v, i) => x(i).toFixed(1) + "," + y(v).toFixed(1)).join(" ");
      s.appendChild(svg("polyline", {points: pts, class: cls, "data-line": l.Name}));
    }
    const item = document.createElement("span");
    const sw = document.createElement("i");
    sw.className = cls;
    item.appendChild(sw);
    const last = l.Values.length ? l.Values[l.Values.length - 1] : 0;
    item.appendChild(document.createTextNode(`${l.Name} ${format(last, c.Unit)}`));
    legend.appendChild(item);
  });
  div.appendChild(s);
  div.appendChild(legend);
  return div;
}

function render(st) {
  controls = st.Controls;
  const s = st.Stats;
  document.getElementById("summary").textContent =
    `${s.Running} running of ${s.MaxConcurrency || "unlimited"} slots, ${s.Queued} queued` +
    (s.MaxQueue ? ` of at most ${s.MaxQueue}` : "") + `, ${s.Completed} completed, ${s.Failed} failed · ` +
    new Date(st.Time).toLocaleTimeString() + (controls ? " · controls on" : " · read-only");
  const scope = document.getElementById("scope");
  scope.textContent = st.Scope || "";
  scope.classList.toggle("hidden", !st.Scope);
  const h = st.History || {Times: [], Charts: []};
  document.getElementById("charts").replaceChildren(...(h.Charts || []).map(c => chart(c, h.Times || [])));
  // While an operator types a weight, the keys table is left as it is:
  // redrawn, it would lose what is typed, and the focus.
  const typing = document.activeElement && document.activeElement.dataset.weight !== undefined &&
    document.getElementById("keys").contains(document.activeElement);
  if (!typing) fill("keys", s.Keys, (row, k) => {
    row.dataset.key = k.Key;
    if (k.Paused) row.classList.add("is-paused");
    cell(row, k.Key === "" ? "(empty)" : k.Key);
    const w = cell(row, k.Weight);
    if (controls) {
      w.textContent = "";
      const input = document.createElement("input");
      input.size = 4; input.value = k.Weight; input.dataset.weight = k.Key;
      input.onchange = () => change("weight", {key: k.Key, weight: input.value});
      w.appendChild(input);
    }
    cell(row, k.MinSlots || "—");
    cell(row, k.MaxConcurrency || "—");
    cell(row, k.Allocation.toFixed(2));
    cell(row, k.Running);
    cell(row, k.Queued);
    cell(row, st.OldestWait[k.Key] ? seconds(st.OldestWait[k.Key]) : "—");
    cell(row, Object.values(k.VirtualTime || {}).map(v => v.toFixed(2)).join(" "));
    cell(row, k.Paused ? "paused" : "", "paused");
    button(controlCell(row), k.Paused ? "resume" : "pause", k.Paused ? "resume-key" : "pause-key", () => ({name: k.Key}));
  });
  fill("types", s.Types, (row, t) => {
    row.dataset.type = t.Name;
    if (t.Paused) row.classList.add("is-paused");
    cell(row, t.Name === "" ? "(default)" : t.Name);
    cell(row, tierName(st, t.Tier));
    cell(row, t.MaxConcurrency || "—");
    cell(row, t.Running);
    cell(row, t.Queued);
    cell(row, t.Completed);
    cell(row, t.Failed);
    cell(row, t.Paused ? "paused" : "", "paused");
    button(controlCell(row), t.Paused ? "resume" : "pause", t.Paused ? "resume-type" : "pause-type", () => ({name: t.Name}));
  });
  fill("tiers", s.Tiers, (row, t) => {
    row.dataset.tier = t.Tier;
    cell(row, tierName(st, t.Tier)); cell(row, t.Limit || "—"); cell(row, t.Running); cell(row, t.Queued);
  });
  fill("resources", s.Resources, (row, r) => { cell(row, r.Name); cell(row, r.Capacity); cell(row, r.InUse); });
  page = st.Page;
  document.getElementById("pageinfo").textContent = `page ${st.Page + 1} of ${st.Pages}, ${st.Jobs} jobs`;
  fill("queue", st.Queue, (row, j) => {
    row.dataset.seq = j.Seq;
    cell(row, j.Seq); cell(row, j.Type, "text"); cell(row, j.ID, "text"); cell(row, j.Key, "text");
    cell(row, j.BasePriority); cell(row, j.EffectivePriority); cell(row, seconds(j.Wait)); cell(row, state(j), "text");
    button(controlCell(row), "cancel", "cancel", () => ({seq: j.Seq}));
  });
  fill("dead", st.Dead, (row, d) => {
    row.dataset.seq = d.Seq;
    cell(row, d.Seq); cell(row, d.Type, "text"); cell(row, d.ID, "text"); cell(row, d.Key, "text");
    cell(row, d.Attempts); cell(row, d.Err, "text");
    const td = controlCell(row);
    button(td, "retry", "retry-dead", () => ({seq: d.Seq}));
    button(td, "disable", "disable", () => ({type: d.Type, id: d.ID, for: ""}));
  });
  const listed = (st.Disabled || []).length;
  document.getElementById("disabledinfo").textContent =
    st.DisabledTotal > listed ? `the ${listed} whose time is up soonest, of ${st.DisabledTotal}` : "";
  document.getElementById("disable").classList.toggle("hidden", !controls);
  fill("disabled", st.Disabled, (row, d) => {
    row.dataset.type = d.Type; row.dataset.id = d.ID;
    cell(row, d.Type, "text"); cell(row, d.ID, "text");
    cell(row, d.Until.startsWith("0001") ? "until enabled" : new Date(d.Until).toLocaleTimeString(), "text");
    button(controlCell(row), "enable", "enable", () => ({type: d.Type, id: d.ID}));
  });
}

async function refresh() {
  const n = ++issued;
  try {
    const resp = await fetch("state.json?page=" + page, {cache: "no-store"});
    if (!resp.ok) throw new Error(await resp.text());
    const st = await resp.json();
    if (n < shown) return; // a newer state is drawn already
    shown = n;
    render(st);
  } catch (e) {
    if (n >= shown) document.getElementById("error").textContent = String(e);
  }
}

async function poll() {
  await refresh();
  setTimeout(poll, refreshEvery);
}

document.getElementById("prev").onclick = () => { page = Math.max(0, page - 1); refresh(); };
document.getElementById("next").onclick = () => { page++; refresh(); };
document.getElementById("disable").onsubmit = ev => {
  ev.preventDefault();
  change("disable", new FormData(ev.target)).then(ok => { if (ok) ev.target.reset(); });
};
poll();

// The meter sign's live updates: tablectl/link/sign/server.py renders the same markup.
const LINK = __LINK__;
function money(c) {
  const d = Math.floor(c / 100), r = c % 100;
  const grouped = String(d).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return "$" + grouped + "." + String(r).padStart(2, "0");
}
function el(tag, text) { const e = document.createElement(tag); e.textContent = text; return e; }
let heard = Date.now(), timeout = __TIMEOUT_MS__;
function show(v) {
  heard = Date.now(); timeout = v.timeout_ms;
  document.getElementById("title").textContent = v.title;
  const amount = document.getElementById("amount");
  amount.textContent = money(v.amount_cents); amount.dataset.version = String(v.version);
  const levels = document.getElementById("levels"); levels.replaceChildren();
  for (const lv of v.levels) {
    const li = document.createElement("li");
    li.append(el("span", lv.title), el("span", money(lv.amount_cents))); levels.append(li);
  }
  const pending = document.getElementById("pending");
  pending.replaceChildren(document.createTextNode("JACKPOT PENDING"));
  for (const p of v.pending) {
    const line = "table " + p.table + " seat " + p.seat + ": " + money(p.amount_cents);
    pending.append(el("div", line));
  }
  pending.classList.toggle("hidden", v.pending.length === 0);
  down(v.shown === "up" ? null : (v.shown === "closed" ? "LINK CLOSED" : "LINK DOWN"), v.reason);
}
function down(word, reason) {
  const d = document.getElementById("down");
  d.classList.toggle("hidden", word === null);
  if (word !== null) {
    d.replaceChildren(document.createTextNode(word));
    const r = el("div", reason || ""); r.id = "down-reason"; d.append(r);
  }
}
const events = new EventSource("/links/" + encodeURIComponent(LINK) + "/events");
events.onmessage = (m) => show(JSON.parse(m.data));
setInterval(() => {
  if (Date.now() - heard > timeout) down("LINK DOWN", "the sign hears nothing");
}, 250);

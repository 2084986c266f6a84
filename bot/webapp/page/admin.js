/* The admin view, for the bot's admins (bot/webapp/admin.py checks every call): the queue now, today's
   drawings and busiest users, the blocked users with an Unblock each, and the workers. Looked at again every
   few seconds while it is on screen, so a queue that grows or drains is seen doing so. */
import { api } from "./api.js";
import { T, isolated } from "./words.js";

const $ = (id) => document.getElementById(id);
const EVERY_MS = 3000;
let timer = null;

export function translateAdmin() {
  const words = { "open-admin": "admin", "admin-queue-head": "admin_queue", "admin-today-head": "admin_today",
                  "admin-top-head": "admin_top", "admin-blocked-head": "admin_blocked",
                  "admin-workers-head": "admin_workers" };
  for (const [id, key] of Object.entries(words)) $(id).textContent = T(key);
}

// Show the view's figures now, and again every few seconds until stopAdmin(); errors go to ``failed``.
export function startAdmin(failed) {
  stopAdmin();
  const look = async () => {
    try {
      draw(await api("/app/api/admin"), failed);
    } catch (e) {
      failed(e);
      return;  // said once; going back and in again asks again
    }
    if (!$("admin").hidden) timer = setTimeout(look, EVERY_MS);
  };
  look();
}

export function stopAdmin() {
  clearTimeout(timer);
  timer = null;
}

// A line of the list: its words, and a button at its end if any. Ids, names and dates go in isolated (words.js),
// so that in Arabic or Persian each keeps its own order and the line reads right to left around them.
function row(words, button, className) {
  const li = document.createElement("li");
  const span = document.createElement("span");
  span.append(...words);
  li.append(span);
  if (button) li.append(button);
  if (className) li.className = className;
  return li;
}

const queueLine = (q) => T("admin_queue_line", { waiting: q.waiting, drawing: q.drawing, seconds: q.oldest_s });

function draw(data, failed) {
  const q = data.queue;
  $("admin-queue").textContent = q.waiting || q.drawing ? queueLine(q) : T("admin_queue_empty");
  $("admin-lines").replaceChildren(...q.users.map((u) =>
    row([isolated(String(u.user)), ": ", queueLine(u)], null, u.drawing ? "drawing" : "")));
  const d = data.today;
  $("admin-today").textContent = T("admin_today_line", { photos: d.photos, clips: d.clips, hd: d.hd });
  $("admin-top-head").hidden = !d.top.length;
  $("admin-top").replaceChildren(...d.top.map((u) => row([isolated(String(u.user)), ": ", isolated(String(u.photos))])));
  drawBlocked(data.blocked, failed);
  $("admin-workers").replaceChildren(...data.workers.map((w) =>
    row([isolated(w.name), " · ", isolated(w.styles.join(", ")), " · ", isolated(w.engine), " · ",
         T(w.busy ? "admin_worker_drawing" : "admin_worker_idle")], null, w.busy ? "drawing" : "")));
  if (!data.workers.length) $("admin-workers").replaceChildren(row([T("admin_workers_none"), " (", data.health, ")"]));
}

function drawBlocked(blocked, failed) {
  $("admin-blocked").replaceChildren(...blocked.map((b) => {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = T("admin_unblock");
    button.dataset.user = b.user;
    button.addEventListener("click", () => unblock(b.user, button, failed));
    const when = new Date(b.at * 1000).toISOString().slice(0, 16).replace("T", " ");
    return row([isolated(String(b.user)), " · ", isolated(`${when} UTC`)], button);
  }));
  if (!blocked.length) $("admin-blocked").replaceChildren(row([T("admin_blocked_none")]));
}

// Unblock, as /unblock does; the list shown is the bot's own after it.
async function unblock(user, button, failed) {
  button.disabled = true;
  try {
    drawBlocked((await api("/app/api/admin/unblock", { user })).blocked, failed);
  } catch (e) {
    button.disabled = false;
    failed(e);
  }
}

/* Talking to the bot: each call signed with Telegram's data (bot/webapp/api.py, docs/webapp.md), and a job
   the bot took on followed until it ends. */
import { client } from "./telegram.js";
import { T } from "./words.js";

const UNREACHABLE_TRIES = 150;  // two seconds apart: five minutes of a bot restarting before the page gives up

export class Said extends Error {}  // an error whose message is the sentence to show
class Unreachable extends Said {}  // no answer, or the proxy's while the bot restarts: worth asking again

export async function api(path, body) {
  let response;
  try {
    response = await fetch(path, {
      method: body === undefined ? "GET" : "POST",
      headers: Object.assign({ Authorization: "tma " + client.initData },
                             body === undefined ? {} : { "Content-Type": "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new Unreachable(T("offline"));
  }
  if ([502, 503, 504].includes(response.status) && body === undefined) throw new Unreachable(T("offline"));
  if (response.status === 401) throw new Said(T("unsigned"));
  if (response.status === 404 && !(response.headers.get("Content-Type") || "").includes("json")) {
    throw new Said(T("gone"));
  }
  if (response.status === 429) throw new Said(T("too_many"));
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (!response.ok) throw new Said((data && data.error) || T("failed"));
  return data;
}

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

// A drawing or sending the bot took on: follow it until it ends, saying where it is meanwhile. The job is in
// the bot's journal, so a restart of the bot (or its proxy) does not end it: keep asking, for a while.
export async function finished(job, say) {
  let misses = 0;
  for (;;) {
    let st;
    try {
      st = await api("/app/api/jobs/" + encodeURIComponent(job));
      misses = 0;
    } catch (e) {
      if (!(e instanceof Unreachable) || ++misses > UNREACHABLE_TRIES) throw e;
      say(T("reconnecting"));
      await sleep(2000);
      continue;
    }
    if (st.state === "done") return st;
    if (st.state === "failed") throw new Said(st.error || T("failed"));
    say(st.stalled ? T("stalled") : st.state === "drawing" ? T("drawing")
      : st.ahead ? T("queued", { n: st.ahead }) : T("queued_next"));
    await sleep(1000);
  }
}

/* The Mini App: the user's results, a before/after divider, a strength slider previewed on the phone,
   their photo in every style, its HD saved and its picture shared to a story. Plain JS, no library; the API is bot/webapp/api.py (docs/webapp.md). */
"use strict";

const SCRIPT_WAIT_MS = 1500;
const UNREACHABLE_TRIES = 150;  // two seconds apart: five minutes of a bot restarting before the page gives up  // Telegram's script, loading beside the page: waited for this long at most
let tg = null;  // Telegram's object, once its script has loaded inside Telegram (outside, it is empty)
// Telegram opens the page with its data in the address's fragment; its script, when it loads, reads the same.
const launch = new URLSearchParams(location.hash.slice(1));
let initData = launch.get("tgWebAppData") || "";

// The script is loaded async, so that a slow or unreachable telegram.org cannot hold the page up.
function telegramScript() {
  const ready = () => window.Telegram && window.Telegram.WebApp;
  const tag = document.getElementById("telegram-script");
  if (ready() || !tag) return Promise.resolve(ready());
  return new Promise((done) => {
    const finish = () => done(ready());
    tag.addEventListener("load", finish);
    tag.addEventListener("error", finish);
    setTimeout(finish, SCRIPT_WAIT_MS);
  });
}

// What the page says, by language: the bot puts it in the page from its catalogue (bot/words/locales/, the
// keys that start with page_), every language complete, English where a translation lacks a sentence.
const WORDS = readWords();

function readWords() {
  try {
    return JSON.parse(document.getElementById("words").textContent) || {};
  } catch (e) {  // a page without them (tests/test_webapp_page.py tries the preview's maths alone)
    return {};
  }
}

const $ = (id) => document.getElementById(id);
// working: the results with a drawing or a sending under way (by id): their buttons wait, other results' do not.
const state = { lang: "en", results: [], more: false, current: null, view: "list", working: new Set() };

function userLanguage() {
  try {
    const user = tg ? tg.initDataUnsafe.user : JSON.parse(new URLSearchParams(initData).get("user") || "{}");
    return pickLanguage(((user && user.language_code) || "").toLowerCase().replace("_", "-"));
  } catch (e) {
    return "en";
  }
}

// As the bot picks it (bot/words/catalogue.py, pick_lang): the whole tag ("pt-br"), else its first part
// ("fa" of "fa-ir"), else the one language of that first part ("pt-br" for "pt"), else English.
function pickLanguage(tag) {
  const speaks = (lang) => Object.prototype.hasOwnProperty.call(WORDS, lang);
  const first = tag.split("-")[0];
  if (speaks(tag)) return tag;
  if (speaks(first)) return first;
  return Object.keys(WORDS).find((lang) => first && lang.split("-")[0] === first) || "en";
}

// A sentence with its {names} filled in; right to left, each value isolated (FSI ... PDI) as the chat's are:
// a Latin name or a number in an Arabic sentence keeps its place and does not turn the words around it.
function T(key, values) {
  const text = (WORDS[state.lang] || WORDS.en || {})[key] || key;
  const [open, close] = (WORDS[state.lang] || {})["$dir"] === "rtl" ? ["\u2068", "\u2069"] : ["", ""];
  return text.replace(/\{(\w+)\}/g, (_, name) => open + String(values && values[name]) + close);
}

// True when the page is laid out right to left (Arabic, Persian): the divider and its keys turn round too.
const rtl = () => document.documentElement.dir === "rtl";

/* --- Telegram's theme ------------------------------------------------------------------------ */

function applyTheme() {
  let params = tg ? tg.themeParams : null;
  if (!params) {
    try { params = JSON.parse(launch.get("tgWebAppThemeParams") || "null"); } catch (e) { params = null; }
  }
  const root = document.documentElement;
  const names = { bg_color: "--bg", text_color: "--text", hint_color: "--hint", link_color: "--link",
                  button_color: "--button", button_text_color: "--button-text",
                  secondary_bg_color: "--second-bg", destructive_text_color: "--danger" };
  for (const [key, variable] of Object.entries(names)) {
    if (params && /^#[0-9a-f]{3,8}$/i.test(params[key] || "")) root.style.setProperty(variable, params[key]);
  }
  // Dark or light: Telegram says so; else the background's lightness; else the system's preference.
  let dark = tg ? tg.colorScheme === "dark" : null;
  if (dark === null && params && params.bg_color) dark = lightness(params.bg_color) < 0.5;
  if (dark === null) dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  root.classList.toggle("dark", Boolean(dark));
}

function lightness(hex) {
  const v = hex.length === 4 ? hex.slice(1).split("").map((c) => parseInt(c + c, 16))
    : [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  return (0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]) / 255;
}

/* --- talking to the bot -------------------------------------------------------------------- */

class Said extends Error {}  // an error whose message is the sentence to show
class Unreachable extends Said {}  // no answer, or the proxy's while the bot restarts: worth asking again

async function api(path, body) {
  let response;
  try {
    response = await fetch(path, {
      method: body === undefined ? "GET" : "POST",
      headers: Object.assign({ Authorization: "tma " + initData },
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
async function finished(job, say) {
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

function showError(error) {
  const box = $("error");
  box.textContent = error instanceof Said ? error.message : T("failed");
  box.hidden = false;
  if (!(error instanceof Said)) console.error(error);
}

function clearError() { $("error").hidden = true; }

/* --- views ------------------------------------------------------------------------------------ */

function show(view) {
  state.view = view;
  for (const name of ["list", "viewer", "styles"]) $(name).hidden = name !== view;
  if (view === "viewer" && state.current) $("title").replaceChildren(isolated(state.current.style_name));
  else $("title").textContent = view === "styles" ? T("styles") : T("title");
  const back = view !== "list";
  if (tg && tg.BackButton) back ? tg.BackButton.show() : tg.BackButton.hide();
  $("back").hidden = !back || Boolean(tg && tg.BackButton);
  updateButtons();
}

function goBack() {
  clearError();
  $("status").textContent = "";
  if (state.view === "styles") show("viewer");
  else if (state.view === "viewer") { show("list"); loadList(0); }
}

async function loadList(offset) {
  try {
    const page = await api("/app/api/results?offset=" + offset);
    state.lang = page.lang || state.lang;
    translate();
    state.results = offset ? state.results.concat(page.results) : page.results;
    state.more = page.more;
    drawList();
  } catch (e) {
    showError(e);
  }
}

function drawList() {
  const grid = $("grid");
  grid.replaceChildren(...state.results.map((r) => {
    const tile = document.createElement("button");
    tile.className = "result";
    tile.dataset.id = r.id;
    tile.setAttribute("aria-label", `${r.style_name} ${r.strength}%`);
    const img = document.createElement("img");
    img.src = r.thumb || r.image;
    img.alt = "";
    img.loading = "lazy";
    const label = document.createElement("span");
    label.append(isolated(r.style_name));
    if (r.strength !== 100) label.append(" · ", isolated(`${r.strength}%`));
    tile.append(img, label);
    tile.addEventListener("click", () => openResult(r));
    return tile;
  }));
  $("empty").hidden = state.results.length > 0;
  $("more").hidden = !state.more;
}

// A name or a number inside a line of the page's own direction.
function isolated(text) {
  const bdi = document.createElement("bdi");
  bdi.textContent = text;
  return bdi;
}

function translate() {
  const [language, region] = state.lang.split("-");
  document.documentElement.lang = state.lang === "zh" ? "zh-CN" : region ? `${language}-${region.toUpperCase()}` : language;
  document.documentElement.dir = (WORDS[state.lang] || {})["$dir"] === "rtl" ? "rtl" : "ltr";
  const words = { "tag-photo": "photo", "tag-anime": "anime", "strength-label": "strength",
                  "keep-colours-label": "keep_colours", send: "send", "send-sticker": "sticker",
                  "open-styles": "open_styles", more: "more", empty: "empty", "styles-hint": "styles_hint",
                  "save-hd": "save_hd", "hd-link": "open_hd", "share-story": "share_story",
                  "story-link": "open_picture" };
  for (const [id, key] of Object.entries(words)) $(id).textContent = T(key);
  $("back").setAttribute("aria-label", T("back"));
  $("divider").setAttribute("aria-label", T("photo") + " / " + T("anime"));
  if (state.view === "list") $("title").textContent = T("title");
}

/* --- the viewer: before and after, strength and colours ----------------------------------------- */

async function openResult(result) {
  clearError();
  state.current = result;
  state.pixels = null;
  $("strength").value = result.strength;
  $("keep-colours").checked = result.keep_colours;
  $("status").textContent = "";
  $("hint").hidden = true;
  const canvas = $("after");
  canvas.width = result.width;
  canvas.height = result.height;
  show("viewer");
  const [drawing, photo, base] = await Promise.all([result.image, result.photo, result.base].map(load));
  if (state.current !== result) return;  // another result was opened meanwhile
  if (!drawing) { showError(new Said(T("failed"))); return; }
  canvas.getContext("2d").drawImage(drawing, 0, 0, result.width, result.height);
  $("before").src = photo ? photo.src : "";
  $("before").hidden = $("divider").hidden = $("tag-photo").hidden = !photo;
  $("strength").disabled = $("keep-colours").disabled = !photo;
  if (!photo) { $("hint").textContent = T("no_photo"); $("hint").hidden = false; return; }
  // Oklab once per opened result; a slider move only mixes numbers.
  state.pixels = { photo: oklab(pixelsOf(photo, result)), drawn: oklab(pixelsOf(base || drawing, result)),
                   exact: Boolean(base) };
  preview();
}

function load(url) {
  if (!url) return Promise.resolve(null);
  const img = new Image();
  img.src = url;
  return img.decode().then(() => img, () => null);
}

function pixelsOf(img, result) {
  const canvas = document.createElement("canvas");
  canvas.width = result.width;
  canvas.height = result.height;
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  ctx.drawImage(img, 0, 0, result.width, result.height);
  return ctx.getImageData(0, 0, result.width, result.height).data;
}

let previewQueued = false;
function schedulePreview() {
  $("strength-value").textContent = $("strength").value + "%";
  if (!busyHere()) $("status").textContent = "";  // "Kept at 40%" is no longer what is on screen
  updateButtons();
  if (!previewQueued) { previewQueued = true; requestAnimationFrame(() => { previewQueued = false; preview(); }); }
}

/* What Keep would draw, drawn here: the server's own maths (inference/colour.py). With the full-strength
   drawing ("base") every strength and both colour choices are exact. Without it, the drawing at its own
   strength s0 is a blend already, and blending it again by s/s0 is exact for any s up to s0. */
function preview() {
  const r = state.current;
  const px = state.pixels;
  $("strength-value").textContent = $("strength").value + "%";
  if (!r || !px) return;
  const s = Number($("strength").value) / 100;
  const colours = $("keep-colours").checked;
  let t = s;
  let hint = "";
  if (!px.exact) {
    const s0 = r.strength / 100;
    if (colours !== r.keep_colours) hint = T("preview_colours");
    else if (s > s0) hint = T("preview_upto", { s: r.strength });
    t = s0 > 0 ? Math.min(1, s / s0) : 1;
  }
  $("hint").textContent = hint;
  $("hint").hidden = !hint;
  if (px.exact && colours && !px.kept) px.kept = keptColours(px.photo, px.drawn);
  const canvas = $("after");
  const image = canvas.getContext("2d").createImageData(r.width, r.height);
  mix(px.photo, px.exact && colours ? px.kept : px.drawn, t, image.data);
  canvas.getContext("2d").putImageData(image, 0, 0);
}

/* --- Oklab, as inference/colour.py computes it --------------------------------------------------- */

const RGB_TO_LMS = [[0.4122214708, 0.5363325363, 0.0514459929], [0.2119034982, 0.6806995451, 0.1073969566],
                    [0.0883024619, 0.2817188376, 0.6299787005]];
const LMS_TO_LAB = [[0.2104542553, 0.7936177850, -0.0040720468], [1.9779984951, -2.4285922050, 0.4505937099],
                    [0.0259040371, 0.7827717662, -0.8086757660]];
const LAB_TO_LMS = invert(LMS_TO_LAB);
const LMS_TO_RGB = invert(RGB_TO_LMS);
const TO_LINEAR = Float32Array.from({ length: 256 }, (_, i) => {
  const c = i / 255;
  return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
});
const GREY_CHROMA = 1e-4;
const GAMMA_STEPS = 8192;  // linear light to sRGB by table: fine enough that no byte comes out differently
const TO_SRGB = Uint8ClampedArray.from({ length: GAMMA_STEPS + 1 }, (_, i) => {
  const l = i / GAMMA_STEPS;
  return Math.round(255 * (l <= 0.0031308 ? 12.92 * l : 1.055 * l ** (1 / 2.4) - 0.055));
});

function invert(m) {
  const [[a, b, c], [d, e, f], [g, h, i]] = m;
  const det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g);
  return [[(e * i - f * h) / det, (c * h - b * i) / det, (b * f - c * e) / det],
          [(f * g - d * i) / det, (a * i - c * g) / det, (c * d - a * f) / det],
          [(d * h - e * g) / det, (b * g - a * h) / det, (a * e - b * d) / det]];
}

function oklab(rgba) {
  const n = rgba.length / 4;
  const lab = new Float32Array(n * 3);
  const [m, k] = [RGB_TO_LMS, LMS_TO_LAB];
  for (let p = 0; p < n; p++) {
    const r = TO_LINEAR[rgba[4 * p]], g = TO_LINEAR[rgba[4 * p + 1]], b = TO_LINEAR[rgba[4 * p + 2]];
    const l = Math.cbrt(m[0][0] * r + m[0][1] * g + m[0][2] * b);
    const mm = Math.cbrt(m[1][0] * r + m[1][1] * g + m[1][2] * b);
    const s = Math.cbrt(m[2][0] * r + m[2][1] * g + m[2][2] * b);
    lab[3 * p] = k[0][0] * l + k[0][1] * mm + k[0][2] * s;
    lab[3 * p + 1] = k[1][0] * l + k[1][1] * mm + k[1][2] * s;
    lab[3 * p + 2] = k[2][0] * l + k[2][1] * mm + k[2][2] * s;
  }
  return lab;
}

/* Keep colours: the drawing's lightness with the photo's colours, made a picture (in sRGB, out-of-gamut
   colours clipped) before it is blended, as the server makes it. */
function keptColours(photo, drawn) {
  const lab = Float32Array.from(photo);
  for (let p = 0; p < lab.length; p += 3) lab[p] = drawn[p];
  const rgba = new Uint8ClampedArray(lab.length / 3 * 4);
  mix(lab, lab, 1, rgba);
  return oklab(rgba);
}

/* Photo towards drawing by t in OkLCh (lightness and chroma straight, hue the shorter way round), written
   into out as RGBA. */
function mix(photo, drawn, t, out) {
  const [q, m] = [LAB_TO_LMS, LMS_TO_RGB];
  const n = photo.length / 3;
  for (let p = 0; p < n; p++) {
    const Lp = photo[3 * p], ap = photo[3 * p + 1], bp = photo[3 * p + 2];
    const La = drawn[3 * p], aa = drawn[3 * p + 1], ba = drawn[3 * p + 2];
    let L = La, A = aa, B = ba;
    if (t <= 0) { L = Lp; A = ap; B = bp; } else if (t < 1) {
      const cp = Math.hypot(ap, bp), ca = Math.hypot(aa, ba);
      // A grey has no hue of its own: it takes the other side's (GREY_CHROMA in inference/colour.py).
      let hp = Math.atan2(bp, ap), ha = Math.atan2(ba, aa);
      if (cp < GREY_CHROMA) hp = ha;
      else if (ca < GREY_CHROMA) ha = hp;
      let dh = (ha - hp + Math.PI) % (2 * Math.PI);
      if (dh < 0) dh += 2 * Math.PI;  // Python's % is floored; JavaScript's keeps the sign
      const hue = hp + t * (dh - Math.PI);
      const chroma = cp + t * (ca - cp);
      L = Lp + t * (La - Lp);
      A = chroma * Math.cos(hue);
      B = chroma * Math.sin(hue);
    }
    const l = (q[0][0] * L + q[0][1] * A + q[0][2] * B) ** 3;
    const mm = (q[1][0] * L + q[1][1] * A + q[1][2] * B) ** 3;
    const s = (q[2][0] * L + q[2][1] * A + q[2][2] * B) ** 3;
    for (let c = 0; c < 3; c++) {
      const linear = Math.min(1, Math.max(0, m[c][0] * l + m[c][1] * mm + m[c][2] * s));
      out[4 * p + c] = TO_SRGB[Math.round(linear * GAMMA_STEPS)];
    }
    out[4 * p + 3] = 255;
  }
}

/* --- the divider -------------------------------------------------------------------------------- */

function setSplit(percent) {
  const split = Math.max(0, Math.min(100, percent));
  $("compare").style.setProperty("--split", split + "%");
  $("divider").setAttribute("aria-valuenow", String(Math.round(split)));
}

function followDivider() {
  const area = $("compare");
  let dragging = false;
  const moveTo = (event) => {
    const box = area.getBoundingClientRect();
    const fromLeft = ((event.clientX - box.left) / box.width) * 100;
    setSplit(rtl() ? 100 - fromLeft : fromLeft);  // the split is measured from where reading starts
  };
  area.addEventListener("pointerdown", (event) => {
    if ($("divider").hidden) return;
    dragging = true;
    area.setPointerCapture(event.pointerId);
    moveTo(event);
  });
  area.addEventListener("pointermove", (event) => { if (dragging) moveTo(event); });
  const stop = () => { dragging = false; };
  area.addEventListener("pointerup", stop);
  area.addEventListener("pointercancel", stop);
  $("divider").addEventListener("keydown", (event) => {
    const now = Number($("divider").getAttribute("aria-valuenow") || 50);
    const forward = rtl() ? -5 : 5;  // right to left, the left arrow moves the divider on
    const step = { ArrowLeft: -forward, ArrowRight: forward, Home: -100, End: 100 }[event.key];
    if (step !== undefined) { setSplit(now + step); event.preventDefault(); }
  });
}

/* --- keeping, sending, styles ------------------------------------------------------------------ */

function changed() {
  const r = state.current;
  return Boolean(r) && (Number($("strength").value) !== r.strength || $("keep-colours").checked !== r.keep_colours);
}

// One main action: Keep when the strength or colours moved, else Send to chat; Telegram's main button when
// there is one, the page's own buttons otherwise.
function updateButtons() {
  const viewing = state.view === "viewer" && state.current;
  const keeping = viewing && changed();
  const label = keeping ? T("keep", { s: $("strength").value }) : T("send");
  $("keep").textContent = label;
  const main = tg && tg.MainButton;
  if (main) {
    if (viewing) {
      main.setParams({ text: label, is_active: !busyHere(), is_visible: true });
    } else {
      main.hide();
    }
  }
  $("keep").hidden = !keeping || Boolean(main);
  $("send").hidden = keeping || !viewing || Boolean(main);
  for (const id of ["keep", "send", "send-sticker", "open-styles", "save-hd"]) $(id).disabled = busyHere();
  showSaving();
}

const busyHere = () => Boolean(state.current) && state.working.has(state.current.id);
const showing = (r) => state.current === r && state.view !== "list";

// Work on result r (a drawing or a sending): its progress is said while r is on screen, and only there. The
// user may go elsewhere meanwhile; the work goes on, and its result is in the list.
async function busy(r, work) {
  if (state.working.has(r.id)) return;
  state.working.add(r.id);
  clearError();
  updateButtons();
  const say = (text) => { if (showing(r)) $("status").textContent = text; };
  try {
    await work(say);
  } catch (e) {
    say("");
    if (showing(r)) showError(e);
  } finally {
    state.working.delete(r.id);
    updateButtons();
  }
}

// Draw the result's photo again: at the slider's strength and colours, or (a style tile) as the tile shows it.
function keep(style) {
  const r = state.current;
  return busy(r, async (say) => {
    const body = style ? { id: r.id, style, strength: 100, keep_colours: false }
      : { id: r.id, style: r.style, strength: Number($("strength").value), keep_colours: $("keep-colours").checked };
    const done = await finished((await api("/app/api/draw", body)).job, say);
    if (!done.result) return;
    if (!showing(r)) {  // the user went elsewhere: it waits in the list, shown now if the list is on screen
      if (state.view === "list") loadList(0);
      return;
    }
    await openResult(done.result);
    $("status").textContent = T("kept", { s: body.strength });
  });
}

function send(as) {
  const r = state.current;
  return busy(r, async (say) => {
    await finished((await api(`/app/api/results/${r.id}/send`, { as })).job, say);
    say(T(as === "sticker" ? "sent_sticker" : "sent"));
  });
}

/* --- HD and stories: Telegram's own where the client has them, a plain link to the picture where not ------ */

// Whether the client has this method of Telegram's object, at the Bot API version that brought it.
const offers = (name, version) => Boolean(tg && typeof tg[name] === "function" && typeof tg.isVersionAtLeast === "function"
  && tg.isVersionAtLeast(version));
const absolute = (path) => new URL(path, location.origin).href;  // Telegram fetches the picture itself

// Which of the four shows for the result on screen: Save HD (Telegram's download, or asking for the HD when it is not
// made yet), its link, Share to story (Telegram's), its link. Without HD on this bot, only sharing the drawing.
function showSaving() {
  const r = state.view === "viewer" ? state.current : null;
  const hd = Boolean(r && r.hd_available);
  const download = offers("downloadFile", "8.0");
  $("save-hd").hidden = !hd || (!download && Boolean(r.hd));
  $("hd-link").hidden = !hd || download || !r.hd;
  $("share-story").hidden = !r || !offers("shareToStory", "7.8");
  $("story-link").hidden = !r || !$("share-story").hidden;
  if (r && r.hd) $("hd-link").href = absolute(r.hd);
  if (r) $("story-link").href = absolute(r.hd || r.image);
}

// A link opened by Telegram where it can (outside the Mini App's frame), else as a link is.
function openedByTelegram(event) {
  if (!tg || typeof tg.openLink !== "function") return;
  event.preventDefault();
  tg.openLink(event.currentTarget.href);
}

// Save HD: the HD asked for first if it is not made yet (followed like a drawing), then Telegram's download; a
// client without it gets the link to the picture instead.
function saveHd() {
  const r = state.current;
  return busy(r, async (say) => {
    if (!r.hd) {
      const done = await finished((await api(`/app/api/results/${r.id}/hd`, {})).job, say);
      r.hd = done.result && done.result.hd;
      if (!r.hd) throw new Said(T("failed"));
    }
    say("");
    if (!showing(r)) return;
    if (offers("downloadFile", "8.0")) {
      tg.downloadFile({ url: absolute(r.hd), file_name: `animebot-${r.style}-${r.id}-hd.${r.format || "jpg"}` });
      say(T("hd_saving"));
    }
    showSaving();
  });
}

function shareToStory() {
  const r = state.current;
  tg.shareToStory(absolute(r.hd || r.image), {});
}

async function openStyles() {
  const r = state.current;
  clearError();
  show("styles");
  const path = `/app/api/results/${r.id}/styles`;
  try {
    let tiles = (await api(path)).styles;
    drawStyles(tiles, r);
    if (tiles.some((tile) => !tile.image)) {
      $("styles-hint").textContent = T("styles_drawing");
      await finished((await api(path, {})).job, () => {});
      if (state.view !== "styles" || state.current !== r) return;
      tiles = (await api(path)).styles;
      drawStyles(tiles, r);
    }
  } catch (e) {
    showError(e);
  }
  $("styles-hint").textContent = T("styles_hint");
}

function drawStyles(tiles, result) {
  $("style-grid").replaceChildren(...tiles.map((tile) => {
    const button = document.createElement("button");
    button.className = "style-tile" + (tile.image ? "" : " empty") + (tile.name === result.style ? " current" : "");
    button.dataset.style = tile.name;
    if (tile.image) {
      const img = document.createElement("img");
      img.src = tile.image;
      img.alt = "";
      button.append(img);
    }
    const name = document.createElement("span");
    name.textContent = tile.title;
    button.append(name);
    button.addEventListener("click", () => { show("viewer"); keep(tile.name); });
    return button;
  }));
}

/* --- start ------------------------------------------------------------------------------------- */

function mainAction() {
  if (state.view !== "viewer" || busyHere()) return;
  changed() ? keep() : send("photo");
}

async function start() {
  const webApp = await telegramScript();
  tg = webApp && webApp.initData ? webApp : null;
  initData = (tg && tg.initData) || initData;
  state.lang = userLanguage();
  applyTheme();
  translate();
  if (tg) {
    tg.ready();
    tg.expand();
    tg.onEvent("themeChanged", applyTheme);
    if (tg.MainButton) tg.MainButton.onClick(mainAction);
    if (tg.BackButton) tg.BackButton.onClick(goBack);
  }
  followDivider();
  $("strength").addEventListener("input", schedulePreview);
  $("keep-colours").addEventListener("change", schedulePreview);
  $("keep").addEventListener("click", () => keep());
  $("send").addEventListener("click", () => send("photo"));
  $("send-sticker").addEventListener("click", () => send("sticker"));
  $("open-styles").addEventListener("click", openStyles);
  $("save-hd").addEventListener("click", saveHd);
  $("share-story").addEventListener("click", shareToStory);
  for (const id of ["hd-link", "story-link"]) $(id).addEventListener("click", openedByTelegram);
  $("back").addEventListener("click", goBack);
  $("more").addEventListener("click", () => loadList(state.results.length));
  show("list");
  if (!initData) { showError(new Said(T("unsigned"))); return; }
  const wanted = new URLSearchParams(location.search).get("r") || launch.get("r");
  if (wanted) {
    try {
      const found = await api("/app/api/results/" + encodeURIComponent(wanted));
      await openResult(found.result);
      loadList(0);
      return;
    } catch (e) {
      showError(e);
    }
  }
  await loadList(0);
}

start();

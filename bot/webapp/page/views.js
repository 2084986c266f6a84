/* The page's views: the list of results, the viewer (before and after, strength and colours), a photo in
   every style; and what the user does there (keep, send, save HD, share to a story). */
import { Said, api, finished } from "./api.js";
import { startAdmin, stopAdmin, translateAdmin } from "./admin.js";
import { keptColours, mix, oklab } from "./colour.js";
import { applyTheme, client, connect, launch, offers, openedByTelegram, telegramUser } from "./telegram.js";
import { followDivider } from "./divider.js";
import { T, isolated, pickLanguage, setLanguage } from "./words.js";

const $ = (id) => document.getElementById(id);
// working: the results with a drawing or a sending under way (by id): their buttons wait, other results' do not.
const state = { results: [], more: false, current: null, view: "list", working: new Set() };

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
  for (const name of ["list", "viewer", "styles", "admin"]) $(name).hidden = name !== view;
  if (view === "viewer" && state.current) $("title").replaceChildren(isolated(state.current.style_name));
  else $("title").textContent = T({ styles: "styles", admin: "admin" }[view] || "title");
  $("open-admin").hidden = !state.admin || view !== "list";
  if (view !== "admin") stopAdmin();
  const back = view !== "list";
  const tg = client.webApp;
  if (tg && tg.BackButton) back ? tg.BackButton.show() : tg.BackButton.hide();
  $("back").hidden = !back || Boolean(client.webApp && client.webApp.BackButton);
  updateButtons();
}

function goBack() {
  clearError();
  $("status").textContent = "";
  if (state.view === "styles") show("viewer");
  else if (state.view === "viewer" || state.view === "admin") { show("list"); loadList(0); }
}

async function loadList(offset) {
  try {
    const page = await api("/app/api/results?offset=" + offset);
    if (page.lang) setLanguage(page.lang);
    translate();
    state.results = offset ? state.results.concat(page.results) : page.results;
    state.more = page.more;
    state.admin = Boolean(page.admin);  // the bot's admins have an admin view; the API checks each call anyway
    $("open-admin").hidden = !state.admin || state.view !== "list";
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


function translate() {
  const words = { "tag-photo": "photo", "tag-anime": "anime", "strength-label": "strength",
                  "keep-colours-label": "keep_colours", send: "send", "send-sticker": "sticker",
                  "open-styles": "open_styles", more: "more", empty: "empty", "styles-hint": "styles_hint",
                  "save-hd": "save_hd", "hd-link": "open_hd", "share-story": "share_story",
                  "story-link": "open_picture" };
  for (const [id, key] of Object.entries(words)) $(id).textContent = T(key);
  translateAdmin();
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
  const main = client.webApp && client.webApp.MainButton;
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
      client.webApp.downloadFile({ url: absolute(r.hd), file_name: `animebot-${r.style}-${r.id}-hd.${r.format || "jpg"}` });
      say(T("hd_saving"));
    }
    showSaving();
  });
}

function shareToStory() {
  const r = state.current;
  client.webApp.shareToStory(absolute(r.hd || r.image), {});
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

export async function start() {
  const tg = await connect();
  setLanguage(pickLanguage((telegramUser() || {}).language_code));
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
  $("open-admin").addEventListener("click", () => { clearError(); show("admin"); startAdmin(showError); });
  show("list");
  if (!client.initData) { showError(new Said(T("unsigned"))); return; }
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

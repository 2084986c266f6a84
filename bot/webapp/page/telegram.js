/* Telegram glue: its script (loaded beside the page, never waited on for long), the signed data it opens the
   page with, its theme, and which of its methods this client has. Outside Telegram, all of it is empty. */

const SCRIPT_WAIT_MS = 1500;  // Telegram's script, loading beside the page: waited for this long at most
// Telegram opens the page with its data in the address's fragment; its script, when it loads, reads the same.
export const launch = new URLSearchParams(location.hash.slice(1));
// webApp: Telegram's object, once its script has loaded inside Telegram; initData: what signs each API call.
export const client = { webApp: null, initData: launch.get("tgWebAppData") || "" };

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

export async function connect() {
  const webApp = await telegramScript();
  client.webApp = webApp && webApp.initData ? webApp : null;
  client.initData = (client.webApp && client.webApp.initData) || client.initData;
  return client.webApp;
}

// The user Telegram says opened the page (its language is the page's first guess), or null.
export function telegramUser() {
  try {
    const tg = client.webApp;
    return (tg ? tg.initDataUnsafe.user : JSON.parse(new URLSearchParams(client.initData).get("user") || "{}")) || null;
  } catch (e) {
    return null;
  }
}

export function applyTheme() {
  const tg = client.webApp;
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

// Whether the client has this method of Telegram's object, at the Bot API version that brought it.
export function offers(name, version) {
  const tg = client.webApp;
  return Boolean(tg && typeof tg[name] === "function" && typeof tg.isVersionAtLeast === "function"
    && tg.isVersionAtLeast(version));
}

// A link opened by Telegram where it can (outside the Mini App's frame), else as a link is.
export function openedByTelegram(event) {
  const tg = client.webApp;
  if (!tg || typeof tg.openLink !== "function") return;
  event.preventDefault();
  tg.openLink(event.currentTarget.href);
}

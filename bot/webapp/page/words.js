/* What the page says, by language: the bot puts it in the page from its catalogue (bot/words/locales/, the
   keys that start with page_), every language complete, English where a translation lacks a sentence, with
   "$dir" saying which way each reads. */

const WORDS = readWords();
let lang = "en";

function readWords() {
  try {
    return JSON.parse(document.getElementById("words").textContent) || {};
  } catch (e) {  // a page without them (tests/test_webapp_page.py tries the preview's maths alone)
    return {};
  }
}

// As the bot picks it (bot/words/catalogue.py, pick_lang): the whole tag ("pt-br"), else its first part
// ("fa" of "fa-ir"), else the one language of that first part ("pt-br" for "pt"), else English.
export function pickLanguage(tag) {
  const speaks = (code) => Object.prototype.hasOwnProperty.call(WORDS, code);
  tag = (tag || "").toLowerCase().replace("_", "-");
  const first = tag.split("-")[0];
  if (speaks(tag)) return tag;
  if (speaks(first)) return first;
  return Object.keys(WORDS).find((code) => first && code.split("-")[0] === first) || "en";
}

// Speak ``code`` from now on: the document's lang and dir follow (a right-to-left page mirrors, app.css).
export function setLanguage(code) {
  lang = code;
  const [language, region] = lang.split("-");
  document.documentElement.lang = lang === "zh" ? "zh-CN" : region ? `${language}-${region.toUpperCase()}` : language;
  document.documentElement.dir = rtlWords() ? "rtl" : "ltr";
}

const rtlWords = () => (WORDS[lang] || {})["$dir"] === "rtl";

// A sentence with its {names} filled in; right to left, each value isolated (FSI ... PDI) as the chat's are:
// a Latin name or a number in an Arabic sentence keeps its place and does not turn the words around it.
export function T(key, values) {
  const text = (WORDS[lang] || WORDS.en || {})[key] || key;
  const [open, close] = rtlWords() ? ["\u2068", "\u2069"] : ["", ""];
  return text.replace(/\{(\w+)\}/g, (_, name) => open + String(values && values[name]) + close);
}

// True when the page is laid out right to left (Arabic, Persian): the divider and its keys turn round too.
export const rtl = () => document.documentElement.dir === "rtl";

// A name or a number inside a line of the page's own direction.
export function isolated(text) {
  const bdi = document.createElement("bdi");
  bdi.textContent = text;
  return bdi;
}

/* The Mini App: the user's results, a before/after divider, a strength slider previewed on the phone, their
   photo in every style, its HD saved and its picture shared to a story. Plain ES modules, no library and no
   build step: views.js (the views), api.js (the bot's API, bot/webapp/api.py), colour.js (the preview's
   maths), divider.js, words.js (the catalogue's sentences), telegram.js (Telegram's object). docs/webapp.md. */
import { start } from "./views.js";

start();

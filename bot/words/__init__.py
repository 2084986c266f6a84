"""The vocabulary the chat, the flow and the Mini App share: every sentence, in gettext catalogues
(locales/), read by catalogue.py. It imports nothing from them, so each can use it."""

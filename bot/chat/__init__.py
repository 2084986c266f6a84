"""The chat: what the user sees and presses. Commands, photos and button presses become requests
here; replies, the status message, keyboards and every sentence (i18n) go back from here."""

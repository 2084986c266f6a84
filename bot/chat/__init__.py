"""The chat: what the user sees and presses. Commands, photos and button presses become requests
here; replies, the status message and keyboards go back from here, in the words of bot/words."""

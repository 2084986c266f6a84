"""Where a photo is received: updates come in by long polling or the webhook, are stored in the
journal first (intake), and albums are gathered into one request."""
